"""``replay``: one job by id, or every ended job of a window that the filters match."""

from __future__ import annotations

import argparse
import shlex
import sys
from typing import Any

from sume.contract.envelope import TERMINAL_EVENTS
from sume.store.queue import JobQueue
from sume_cli import CHECK_FAILED, OK, USAGE, OpsError, jobs
from sume_cli.commands import PROG, deployment_option
from sume_cli.commands.jobs import cmd_replay
from sume_cli.context import Ops
from sume_cli.output import as_json_output, dump, note, out, table
from sume_cli.replaying import (
    DEFAULT_RATE,
    MAX_RATE,
    REPLAYABLE,
    Filters,
    Pace,
    Plan,
    Progress,
    plan,
    replay_all,
    run_id,
)
from sume_cli.report import MAX_WINDOW_DAYS, OUTCOMES, Window
from sume_cli.times import iso, parse_since

# The window and filter options, as (flag, dest): any of them needs --since.
_WINDOW_OPTIONS = (
    ("--until", "until"),
    ("--state", "states"),
    ("--outcome", "outcomes"),
    ("--error-code", "error_codes"),
    ("--event", "events"),
    ("--dry-run", "dry_run"),
    ("--rate", "rate"),
)


def add_replay_arguments(parser: argparse.ArgumentParser) -> None:
    """``replay``'s arguments: a job id, or a window (docs/cli.md, "Replay a window")."""
    parser.add_argument("job_id", metavar="JOB_ID", nargs="?")
    parser.add_argument("--reason", metavar="TEXT", help="why, kept on the item (e.g. the fix)")
    group = parser.add_argument_group("a window instead of JOB_ID (--reason required)")
    group.add_argument("--since", help="jobs that entered since: 30m, 3h, 7d or an ISO time (UTC)")
    group.add_argument("--until", help="... and until: a duration ago or an ISO time (default now)")
    group.add_argument(
        "--state",
        dest="states",
        action="append",
        choices=[state.value for state in REPLAYABLE],
        help="repeatable; default both",
    )
    group.add_argument(
        "--outcome", dest="outcomes", action="append", choices=OUTCOMES, help="repeatable"
    )
    group.add_argument(
        "--error-code",
        dest="error_codes",
        action="append",
        metavar="CODE",
        help="a processing_error job's code or its last error's (e.g. http_503); repeatable",
    )
    group.add_argument(
        "--event", dest="events", action="append", choices=list(TERMINAL_EVENTS), help="repeatable"
    )
    group.add_argument(
        "--dry-run", action="store_true", help="list the jobs it would replay, and why; no write"
    )
    group.add_argument(
        "--rate",
        type=float,
        help=f"replays a second (default {DEFAULT_RATE:g}, at most {MAX_RATE:g})",
    )


def cmd_replay_any(ops: Ops, args: argparse.Namespace) -> int:
    if args.job_id is not None:
        if args.since is not None:
            raise OpsError("pass either JOB_ID or --since, not both", USAGE)
        if given := _window_options_given(args):
            raise OpsError(f"{given} needs --since (a window), not JOB_ID", USAGE)
        return cmd_replay(ops, args)
    if args.since is None:
        if given := _window_options_given(args):
            raise OpsError(f"{given} needs --since (a window)", USAGE)
        raise OpsError("replay what? pass JOB_ID, or --since for a window", USAGE)
    return cmd_replay_window(ops, args)


def _window_options_given(args: argparse.Namespace) -> str | None:
    for flag, dest in _WINDOW_OPTIONS:
        if getattr(args, dest) not in (None, False):
            return flag
    return None


def _window(args: argparse.Namespace, now: int) -> Window:
    since = parse_since(args.since, now)
    until = parse_since(args.until, now) if args.until is not None else now
    if since > now:
        raise OpsError(f"--since {args.since!r} is in the future", USAGE)
    if until < since:
        raise OpsError(f"--until {args.until!r} is before --since {args.since!r}", USAGE)
    if until - since > MAX_WINDOW_DAYS * 86400:
        raise OpsError(f"the window spans at most {MAX_WINDOW_DAYS} days", USAGE)
    return Window(since, until, since)


def _rate(args: argparse.Namespace) -> float:
    rate = DEFAULT_RATE if args.rate is None else args.rate
    if not 0 < rate <= MAX_RATE:
        raise OpsError(f"--rate {args.rate:g}: more than 0, at most {MAX_RATE:g} a second", USAGE)
    return rate


def _again(ops: Ops, found: Plan, reason: str) -> str:
    """The command that runs this replay again on the same window, to the second."""
    words = [
        PROG,
        *deployment_option(ops).split(" ", 1),
        "replay",
        "--since",
        str(iso(found.window.since)),
        "--until",
        str(iso(found.window.until)),
    ]
    f = found.filters
    for flag, values in (
        ("--state", f.states),
        ("--outcome", f.outcomes),
        ("--error-code", f.error_codes),
        ("--event", f.events),
    ):
        for value in values:
            words += [flag, value]
    return shlex.join([*words, "--reason", reason])


def _as_dict(found: Plan, reason: str, dry_run: bool) -> dict[str, Any]:
    return {
        "run": found.run,
        "reason": reason,
        "dry_run": dry_run,
        "since": iso(found.window.since),
        "until": iso(found.window.until),
        "filters": found.filters.as_dict(),
        "ended_in_window": found.in_window,
        "matched": len(found.matched),
        "jobs": [
            {"job_id": m.job_id, "state": m.state, "entered": iso(m.window_at), "why": m.why}
            for m in found.matched
        ],
        "already_replayed": [m.job_id for m in found.done],
        "entries_read": found.entries_read,
        "items_read": found.items_read,
    }


def _on_each(rate: float) -> Any:
    """The progress line on stderr: redrawn in place on a terminal, else every tenth."""
    tty = sys.stderr.isatty()

    def show(progress: Progress) -> None:
        step = max(1, progress.total // 10)
        if not tty and progress.handled % step and progress.handled != progress.total:
            return
        left = (progress.total - progress.handled) / rate
        line = (
            f"replayed {len(progress.replayed)}/{progress.total} "
            f"(already {len(progress.already)}, refused {len(progress.refused)}) "
            f"at {rate:g}/s, ~{left:.0f} s left"
        )
        if tty:
            last = progress.handled == progress.total
            print(f"\r{line}", end="\n" if last else "", file=sys.stderr)
        else:
            note(line)

    return show


def cmd_replay_window(ops: Ops, args: argparse.Namespace) -> int:
    reason = jobs.check_reason(args.reason)
    if reason is None:
        raise OpsError("--reason is required with --since: it names the run", USAGE)
    window = _window(args, ops.now())
    rate = _rate(args)
    filters = Filters(
        tuple(args.states or ()),
        tuple(args.outcomes or ()),
        tuple(args.error_codes or ()),
        tuple(args.events or ()),
    )
    found = plan(ops.jobs, window, filters, run_id(reason), ops.read_shards)
    again = _again(ops, found, reason)
    if args.dry_run:
        return _dry_run(found, reason, again, args)
    progress = Progress(len(found.matched))
    queue = JobQueue(ops.client("sqs"), ops.stack.names.queue_url)
    try:
        replay_all(ops.jobs, queue, found, reason, Pace(rate), progress, _on_each(rate), ops.clock)
    except BaseException:
        _summary(found, reason, progress, args, complete=False)
        note(f"stopped after {progress.handled} of {progress.total}: to continue, run {again}")
        raise
    return _summary(found, reason, progress, args, complete=True)


def _dry_run(found: Plan, reason: str, again: str, args: argparse.Namespace) -> int:
    if as_json_output(args):
        dump({**_as_dict(found, reason, True), "command": again})
        return OK
    if found.matched:
        table(
            [[m.job_id, m.state, str(iso(m.window_at)), ", ".join(m.why)] for m in found.matched],
            ["JOB_ID", "STATE", "ENTERED", "MATCHED"],
        )
    out(
        f"dry run: {len(found.matched)} job(s) to replay as {found.run} ({reason!r}), "
        f"entered {iso(found.window.since)} .. {iso(found.window.until)}; nothing replayed"
    )
    if found.done:
        out(f"already replayed by this run (skipped): {', '.join(m.job_id for m in found.done)}")
    out(f"to replay them: {again}")
    _cost(found)
    return OK


def _cost(found: Plan) -> None:
    note(
        f"{found.in_window} ended job(s) in the window; read {found.entries_read} report index "
        f"entries and {found.items_read} item(s), no Scan"
    )


def _summary(
    found: Plan, reason: str, progress: Progress, args: argparse.Namespace, complete: bool
) -> int:
    skipped = [m.job_id for m in found.done] + progress.already
    if as_json_output(args):
        dump(
            {
                **_as_dict(found, reason, False),
                "replayed": progress.replayed,
                "already_replayed": skipped,
                "refused": progress.refused,
                "complete": complete,
            }
        )
    else:
        out(
            f"replayed {len(progress.replayed)} job(s) as {found.run} ({reason!r}); "
            f"already replayed by this run: {len(skipped)}; refused: {len(progress.refused)}"
        )
        for job_id, state in progress.refused.items():
            out(f"  refused {job_id}: it is {state} now, no longer finished")
        _cost(found)
    return CHECK_FAILED if progress.refused else OK
