"""``report``: how every job since a time ended, and ``--check``; ``announce-owed``."""

from __future__ import annotations

import argparse

from sume.store.queue import JobQueue
from sume_cli import CHECK_FAILED, OK, USAGE, OpsError, owed, report
from sume_cli.commands.pause import paused
from sume_cli.commands.replay import window_replay
from sume_cli.context import Ops
from sume_cli.invocation import Step
from sume_cli.output import as_json_output, dump, note, out, table
from sume_cli.replaying import Filters
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
    # Half-open: the window holds the current second too.
    return report.Window(since, now + 1, now - overdue_after)


def _listed(listed: report.Listed, rest: str) -> str:
    shown = ", ".join(listed.job_ids)
    if listed.more:
        shown += f"{', ' if shown else ''}and {listed.more} more ({rest})"
    return shown


def _steps(ops: Ops, group: report.Group, window: report.Window, worker_paused: bool) -> list[Step]:
    """The commands that deal with a whole group of problem jobs, in order."""
    first = group.listed.job_ids[0] if group.listed.job_ids else None
    if group.kind == "processing_error":
        code = group.error_code
        # From the group's oldest job: the same command, and run, in every report that
        # shows the group, whatever its window.
        since = group.listed.oldest or window.since
        reason = f"processing_error {code or ''} since {iso(since)}".replace("  ", " ")
        filters = Filters((group.kind,), error_codes=(code,) if code else ())
        steps = []
        if not worker_paused:
            steps.append(
                Step(
                    ops.argv("pause", "worker", "--reason", reason),
                    "jobs stop ending in error; deliveries are still stored",
                    "while the cause persists",
                )
            )
        steps.append(
            Step(
                window_replay(ops, since, None, filters, reason, dry_run=True),
                "once the cause is fixed: lists the jobs and prints the command that replays them",
            )
        )
        return steps
    if group.kind == "parked":
        return [
            Step(ops.argv("dlq", "peek"), "why each is parked"),
            Step(
                ops.argv("dlq", "redrive"), "once the cause is fixed: the worker takes them again"
            ),
        ]
    why = {
        "lost": "why polling gave up: its last poll error",
        "overdue": "due, and the poller has not acted: its log says why",
    }[group.kind]
    return [Step(ops.argv("status", first), why)] if first else []


def _name(group: report.Group) -> str:
    return f"{group.kind} {group.error_code}" if group.error_code else group.kind


def cmd_report(ops: Ops, args: argparse.Namespace) -> int:
    window = _report_window(args, ops.now())
    found = report.report(ops.jobs, window, args.limit, ops.read_shards)
    problems = found.problems
    held = paused(ops)
    worker_paused = any(state["work"] == "worker" for state in held.states)
    groups = [(group, _steps(ops, group, window, worker_paused)) for group in found.groups]
    resumes = [
        Step(argv, f"{work} paused: once the cause is fixed, the backlog drains")
        for work, argv in held.next.items()
    ]
    most = max((listed.count for listed in problems.values()), default=0)
    rest = f"raise --limit: {ops.line('report', '--since', args.since, '--limit', str(most))}"

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
                "groups": [
                    {
                        "state": group.kind,
                        "error_code": group.error_code,
                        **group.listed.as_dict(),
                        "next": [step.as_dict() for step in steps],
                    }
                    for group, steps in groups
                ],
                "next": [step.as_dict() for _, steps in groups for step in steps]
                + [step.as_dict() for step in resumes],
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
                    ", ".join(f"{code or '-'} {each.count}" for code, each in found.errors.items()),
                ],
                ["lost", str(found.lost.count), ""],
                ["replayed", str(found.replayed), ""],
                ["pending", str(sum(found.pending.values())), pending],
                ["parked (pending, message in the jobs DLQ)", str(found.parked.count), ""],
                [
                    f"overdue (due before {iso(window.overdue_before)})",
                    str(found.overdue.count),
                    "",
                ],
            ],
            ["", "COUNT", "DETAIL"],
        )
        if groups or resumes:
            out()
            out("to put right, by state and error code (the commands run as printed):")
        for group, steps in groups:
            out(f"{_name(group)}: {group.listed.count} job(s): {_listed(group.listed, rest)}")
            for step in steps:
                out(f"  next: {step.line()}")
        for step in resumes:
            out(f"  next: {step.line()}")
    note(f"read {found.entries_read} index entries and {found.items_read} item(s); no Scan")
    held.show()
    if not args.check:
        return OK
    failed = [f"{_name(group)} {group.listed.count}" for group, _ in groups]
    # Work paused and forgotten: nothing the window holds gets done.
    failed += [f"{work} paused" for work in held.next]
    if failed:
        note(f"check failed: {', '.join(failed)} (next: the commands above)")
        return CHECK_FAILED
    note(
        f"check passed: no job that entered {iso(window.since)} .. {iso(window.until)} is lost, "
        "in processing_error, parked or overdue, and all work runs"
    )
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
    note(owed.summary(found, ops.line, args))
    return OK
