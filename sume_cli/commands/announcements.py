"""``announcements replay``: a window of archived announcements, sent again to one rule."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

from sume.core.ids import InvalidJobId, check_job_id
from sume_cli import CHECK_FAILED, OK, USAGE, OpsError, announcements, jobs
from sume_cli.context import Ops
from sume_cli.output import as_json_output, dump, note, out
from sume_cli.times import iso, parse_since


def add_commands(commands: Any, command: Callable[..., argparse.ArgumentParser]) -> None:
    """``announcements replay`` under ``commands``, made by main's ``command``."""
    family = command(commands, "announcements", None, "the bus's archive of announcements")
    actions = family.add_subparsers(dest="announcements_command", required=True, metavar="ACTION")
    _add_arguments(
        command(
            actions,
            "replay",
            cmd_announcements_replay,
            "send a window of archived announcements again, to one subscriber's rule only",
        )
    )


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--since", required=True, help="from: a duration ago (30m, 2h, 7d) or an ISO time (UTC)"
    )
    parser.add_argument(
        "--until", help="until (not included): a duration ago or an ISO time (default now)"
    )
    parser.add_argument(
        "--rule", required=True, metavar="RULE_NAME", help="the subscriber's rule on the bus"
    )
    parser.add_argument(
        "--job",
        action="append",
        default=[],
        metavar="JOB_ID",
        help="only the minutes around this job's latest announcement (repeatable)",
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="say what would be replayed, start nothing"
    )


def cmd_announcements_replay(ops: Ops, args: argparse.Namespace) -> int:
    for job_id in args.job:
        try:
            check_job_id(job_id)
        except InvalidJobId as exc:
            raise OpsError(f"--job {job_id!r}: {exc}", USAGE) from None
    now = time.time()
    since = parse_since(args.since, now)
    until = int(now)
    if args.until is not None:
        until = min(parse_since(args.until, now, "--until"), until)
    names = ops.stack.names
    events = ops.client("events")
    target = announcements.find_target(
        events, names.event_bus, names.announcements_archive, args.rule, now
    )
    chosen = announcements.plan(
        target, since, until, [jobs.load(ops.jobs, job_id) for job_id in args.job]
    )
    summary = _summary(chosen)
    if announcements.recent(chosen, now):
        note(
            "the window reaches into the last 10 minutes: EventBridge may not have "
            "archived all of them yet; replay that part again later if one is missing"
        )
    if args.dry_run:
        if as_json_output(args):
            dump({**summary, "dry_run": True})
        else:
            _show(summary)
            out("dry run: nothing replayed; run it again without --dry-run to replay")
        return OK
    if not as_json_output(args):
        _show(summary)
    outcome = announcements.run(events, chosen, now, progress=note)
    if as_json_output(args):
        dump({**summary, "replays": outcome.replays})
    else:
        for replay in outcome.replays:
            reason = f" ({replay['reason']})" if replay.get("reason") else ""
            out(f"replay {replay['replay_name']}: {replay['state']}{reason}")
    return OK if outcome.ok else CHECK_FAILED


def _summary(chosen: announcements.Plan) -> dict[str, Any]:
    return {
        "rule": chosen.target.rule,
        "bus": chosen.target.bus,
        "archive": chosen.target.archive,
        "windows": [{"since": iso(start), "until": iso(end)} for start, end in chosen.windows],
        "jobs": list(chosen.jobs),
    }


def _show(summary: dict[str, Any]) -> None:
    out(
        f"archive {summary['archive']} -> rule {summary['rule']} only "
        f"(bus {summary['bus']}), {len(summary['windows'])} window(s):"
    )
    for window in summary["windows"]:
        out(f"  [{window['since']}, {window['until']})")
    for job in summary["jobs"]:
        out(f"  job {job['job_id']}: sequence {job['sequence']}, ended {job['ended_at']}")
    if summary["jobs"]:
        out(
            "  (other announcements of the same minutes reach the rule too: "
            "dedupe on job_id, sequence)"
        )
