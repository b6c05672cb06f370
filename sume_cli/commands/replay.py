"""``replay``: one job by id, or every ended job of a window that the filters match."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from sume.contract.envelope import TERMINAL_EVENTS
from sume.store.queue import JobQueue
from sume_cli import CHECK_FAILED, OK, USAGE, OpsError, jobs
from sume_cli.commands.jobs import cmd_replay
from sume_cli.context import Ops
from sume_cli.invocation import shell
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

# Codes one run may filter on: each is a value of its write's condition, twice.
MAX_ERROR_CODES = 40
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
    # Half-open: by default the window holds the current second too.
    until = parse_since(args.until, now, "--until") if args.until is not None else now + 1
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


def filter_words(filters: Filters) -> list[str]:
    """The options that give ``filters`` again."""
    words = []
    for flag, values in (
        ("--state", filters.states),
        ("--outcome", filters.outcomes),
        ("--error-code", filters.error_codes),
        ("--event", filters.events),
    ):
        for value in values:
            words += [flag, value]
    return words


def window_replay(
    ops: Ops, since: int, until: int | None, filters: Filters, reason: str, dry_run: bool
) -> list[str]:
    """The command that replays ``filters``' jobs of a window (to now without ``until``)."""
    window = ["--since", str(iso(since))]
    if until is not None:
        window += ["--until", str(iso(until))]
    last = ["--dry-run"] if dry_run else []
    return ops.argv("replay", *window, *filter_words(filters), "--reason", reason, *last)


def _again(ops: Ops, found: Plan, reason: str) -> list[str]:
    """The command that runs this replay again on the same window, to the second."""
    return window_replay(ops, found.window.since, found.window.until, found.filters, reason, False)


def _held(ops: Ops, found: Plan, reason: str) -> list[dict[str, Any]]:
    """What the window holds, by state and error code, each error group with the dry run
    that selects it."""
    held = []
    for (state, code), count in found.held.items():
        command = None
        if code is not None:
            group = Filters((state,), error_codes=(code,))
            command = window_replay(
                ops, found.window.since, found.window.until, group, reason, True
            )
        held.append({"state": state, "error_code": code, "count": count, "command": command})
    return held


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
    # The write's condition holds them (DynamoDB's IN takes at most 100 values).
    if len(filters.error_codes) > MAX_ERROR_CODES:
        raise OpsError(f"--error-code: at most {MAX_ERROR_CODES} codes", USAGE)
    found = plan(ops.jobs, window, filters, run_id(reason), ops.read_shards)
    if not (found.matched or found.done):
        return _nothing_matched(ops, found, reason, args)
    again = _again(ops, found, reason)
    if args.dry_run:
        return _dry_run(found, reason, again, args)
    progress = Progress(len(found.matched))
    queue = JobQueue(ops.client("sqs"), ops.stack.names.queue_url)
    sweep_after = ops.sweep_after().seconds
    try:
        replay_all(
            ops.jobs,
            queue,
            found,
            reason,
            Pace(rate),
            progress,
            sweep_after,
            _on_each(rate),
            ops.clock,
        )
    except BaseException:
        _summary(found, reason, progress, args, complete=False, again=again)
        note(
            f"stopped after {progress.handled} of {progress.total}{_unsent(progress)}: "
            f"to continue, run {shell(again)}"
        )
        raise
    return _summary(found, reason, progress, args, complete=True)


def _unsent(progress: Progress) -> str:
    """The jobs a stop left replayed but not queued: owed, found by the sweeper."""
    if not progress.unsent:
        return ""
    owed = ", ".join(
        f"{job_id} replayed but not queued: the sweeper queues it from {iso(due)}"
        for job_id, due in progress.unsent.items()
    )
    return f" ({owed})"


def _nothing_matched(ops: Ops, found: Plan, reason: str, args: argparse.Namespace) -> int:
    """No job to replay: say what the window does hold, and print no command to replay it."""
    held = _held(ops, found, reason)
    if as_json_output(args):
        dump({**_as_dict(found, reason, args.dry_run), "held": held, "command": None})
    else:
        asked = " ".join(filter_words(found.filters)) or "the default filters"
        out(
            f"no ended job that entered {iso(found.window.since)} .. {iso(found.window.until)} "
            f"matches {asked}; nothing replayed"
        )
        if held:
            out("the window holds:")
            table(
                [
                    [
                        h["state"],
                        h["error_code"] or "-",
                        str(h["count"]),
                        shell(h["command"]) if h["command"] else "",
                    ]
                    for h in held
                ],
                ["STATE", "ERROR_CODE", "JOBS", "TO SEE THEM"],
            )
        else:
            out("the window holds no ended job")
    _cost(found)
    return CHECK_FAILED


def _dry_run(found: Plan, reason: str, again: list[str], args: argparse.Namespace) -> int:
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
    out(f"to replay them: {shell(again)}")
    _cost(found)
    return OK


def _cost(found: Plan) -> None:
    note(
        f"{found.in_window} ended job(s) in the window; read {found.entries_read} report index "
        f"entries and {found.items_read} item(s), no Scan"
    )


def _summary(
    found: Plan,
    reason: str,
    progress: Progress,
    args: argparse.Namespace,
    complete: bool,
    again: list[str] | None = None,
) -> int:
    """What the run did; ``again``: the command that continues a run stopped halfway."""
    skipped = [m.job_id for m in found.done] + progress.already
    if as_json_output(args):
        dump(
            {
                **_as_dict(found, reason, False),
                "replayed": progress.replayed,
                "already_replayed": skipped,
                "refused": progress.refused,
                "not_queued": list(progress.unsent),
                "complete": complete,
                "command": None if complete else again,
            }
        )
    else:
        out(
            f"replayed {len(progress.replayed)} job(s) as {found.run} ({reason!r}); "
            f"already replayed by this run: {len(skipped)}; refused: {len(progress.refused)}"
        )
        for job_id, state in progress.refused.items():
            why = "no longer matches the filters" if state in REPLAYABLE else "no longer finished"
            out(f"  refused {job_id}: it is {state} now, {why}")
        _cost(found)
    return CHECK_FAILED if progress.refused else OK
