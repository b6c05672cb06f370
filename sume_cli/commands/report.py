"""``report``: how every job since a time ended, and ``--check``; ``announce-owed``."""

from __future__ import annotations

import argparse

from sume.store.queue import JobQueue
from sume_cli import CHECK_FAILED, OK, USAGE, OpsError, owed, report
from sume_cli.commands import PROG, deployment_option
from sume_cli.commands.pause import paused
from sume_cli.context import Ops
from sume_cli.output import as_json_output, dump, note, out, table
from sume_cli.times import iso, parse_duration, parse_since


def _report_window(args: argparse.Namespace, now: int) -> report.Window:
    since = parse_since(args.since, now)
    if since > now:
        raise OpsError(f"--since {args.since!r} is in the future", USAGE)
    if now - since > report.MAX_WINDOW_DAYS * 86400:
        raise OpsError(f"--since {args.since!r}: at most {report.MAX_WINDOW_DAYS} days back", USAGE)
    if args.limit < 0:
        raise OpsError("--limit must be at least 0", USAGE)
    overdue_after = parse_duration(args.overdue_after, "--overdue-after")
    return report.Window(since, now, now - overdue_after)


def _listed(listed: report.Listed, rest: str) -> str:
    shown = ", ".join(listed.job_ids)
    if listed.more:
        shown += f"{', ' if shown else ''}and {listed.more} more ({rest})"
    return shown


def cmd_report(ops: Ops, args: argparse.Namespace) -> int:
    window = _report_window(args, ops.now())
    found = report.report(ops.jobs, window, args.limit, ops.read_shards)
    problems = found.problems
    held = paused(ops)
    most = max((listed.count for listed in problems.values()), default=0)
    cli = f"{PROG} {deployment_option(ops)}"
    rest = f"raise --limit: {cli} report --since {args.since} --limit {most}"
    steps = {kind: report.NEXT[kind].format(cli=cli) for kind in problems}

    def detail(kind: str, listed: report.Listed) -> str:
        shown = _listed(listed, rest)
        return f"{shown}; next: {steps[kind]}" if kind in steps else shown

    if as_json_output(args):
        dump(
            {
                "since": iso(window.since),
                "until": iso(window.until),
                "overdue_before": iso(window.overdue_before),
                "jobs": found.jobs,
                "registered": found.registered,
                "received_by_webhook": found.received_by_webhook,
                "recovered_by_poll": found.recovered_by_poll,
                "processed": {"count": sum(found.processed.values()), **found.processed},
                "processing_error": found.processing_error.as_dict(),
                "lost": found.lost.as_dict(),
                "replayed": found.replayed,
                "pending": {
                    "count": sum(found.pending.values()),
                    **found.pending,
                    "parked": found.parked.count,
                },
                "parked": found.parked.as_dict(),
                "overdue": found.overdue.as_dict(),
                "index_entries_read": found.entries_read,
                "items_read": found.items_read,
                "problems": [f"{kind} {listed.count}" for kind, listed in problems.items()]
                + [f"paused {state['work']}" for state in held.states],
                "next": steps,
                "paused": held.states,
            }
        )
    else:
        processed = ", ".join(f"{outcome} {n}" for outcome, n in found.processed.items())
        pending = ", ".join(f"{state} {n}" for state, n in found.pending.items())
        out(
            f"jobs that entered {iso(window.since)} .. {iso(window.until)} "
            "(registered, else first recorded)"
        )
        table(
            [
                ["jobs", str(found.jobs), ""],
                ["registered", str(found.registered), ""],
                ["received by webhook", str(found.received_by_webhook), ""],
                ["recovered by poll", str(found.recovered_by_poll), ""],
                ["processed", str(sum(found.processed.values())), processed],
                [
                    "processing_error",
                    str(found.processing_error.count),
                    detail("processing_error", found.processing_error),
                ],
                ["lost", str(found.lost.count), detail("lost", found.lost)],
                ["replayed", str(found.replayed), ""],
                ["pending", str(sum(found.pending.values())), pending],
                [
                    "parked (pending, message in the jobs DLQ)",
                    str(found.parked.count),
                    detail("parked", found.parked),
                ],
                [
                    f"overdue (due before {iso(window.overdue_before)})",
                    str(found.overdue.count),
                    detail("overdue", found.overdue),
                ],
            ],
            ["", "COUNT", "DETAIL"],
        )
    note(f"read {found.entries_read} index entries and {found.items_read} item(s); no Scan")
    held.show()
    if args.check and (problems or held.next):
        failed = [
            f"{kind} {listed.count} (next: {steps[kind]})" for kind, listed in problems.items()
        ]
        # Work paused and forgotten: nothing the window holds gets done.
        failed += [f"{work} paused (next: {step})" for work, step in held.next.items()]
        note(f"check failed: {', '.join(failed)}")
        return CHECK_FAILED
    return OK


def cmd_announce_owed(ops: Ops, args: argparse.Namespace) -> int:
    now = ops.now()
    queue = JobQueue(ops.client("sqs"), ops.stack.names.queue_url)
    window = _report_window(args, now)
    found = owed.announce_owed(ops.jobs, queue, window, now, ops.read_shards, args.dry_run)
    if as_json_output(args):
        dump(found.as_dict())
    elif found.jobs:
        table(found.rows(), owed.HEADER)
    note(owed.summary(found, f"{PROG} {deployment_option(ops)}", args))
    return OK
