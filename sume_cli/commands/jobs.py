"""The job commands: ``status``, ``list``, ``expect``, ``replay``."""

from __future__ import annotations

import argparse

from sume.store.queue import JobQueue
from sume_cli import OK, jobs
from sume_cli.commands.pause import paused
from sume_cli.context import Ops
from sume_cli.listing import DEFAULT_STATE, SCANNED, list_jobs
from sume_cli.output import as_json_output, dump, note, out, table
from sume_cli.story import as_json, render
from sume_cli.times import iso, parse_since


def cmd_status(ops: Ops, args: argparse.Namespace) -> int:
    job = jobs.load(ops.jobs, args.job_id)
    if as_json_output(args):
        dump(as_json(job))
    else:
        out(render(job, ops.invocation))
    # On stderr: the item's story stays as it is, to people and to scripts.
    paused(ops).show()
    return OK


def cmd_list(ops: Ops, args: argparse.Namespace) -> int:
    state = args.state or DEFAULT_STATE
    since = parse_since(args.since, ops.clock()) if args.since else None
    budget = args.scan_budget if args.scan else None
    listing = list_jobs(ops.jobs, state, since, args.limit, budget, ops.read_shards)
    scanned = state in SCANNED
    source = "by a bounded Scan" if scanned else "from the due-work index"
    if as_json_output(args):
        dump(
            {
                "state": state,
                "jobs": [as_json(job) for job in listing.jobs],
                "items_read": listing.read,
                "complete": listing.complete,
                "source": "scan" if scanned else "index",
            }
        )
    elif listing.jobs:
        times = listing.time_attributes
        rows = []
        for job in listing.jobs:
            item = job.as_item()
            rows.append(
                [
                    job.job_id,
                    job.state or "",
                    job.event or "",
                    *(iso(item.get(attribute)) or "-" for attribute in times),
                    iso(job.due_at) or "-",
                ]
            )
        table(
            rows,
            ["JOB_ID", "STATE", "EVENT", *(a.upper() for a in times), "DUE_AT"],
        )
    else:
        out(f"no {state} jobs")
    summary = f"{len(listing.jobs)} {state} job(s); read {listing.read} item(s) {source}"
    if not listing.complete:
        summary += "; stopped early, more may exist (raise --limit"
        summary += " or --scan-budget)" if scanned else ")"
    note(summary)
    return OK


def cmd_expect(ops: Ops, args: argparse.Namespace) -> int:
    metadata = jobs.parse_metadata(args.metadata)
    first = ops.first_poll()
    created, job = jobs.expect(
        ops.registry(first), ops.jobs, args.job_id, args.status_url, metadata
    )
    if as_json_output(args):
        dump(
            {
                "registered": created,
                "first_poll_after_seconds": first.seconds,
                "first_poll_after_source": first.source,
                "job": as_json(job),
            }
        )
    elif created:
        out(
            f"registered {args.job_id}: first status poll at {iso(job.due_at)} "
            f"(after {first.seconds} s: {first.source})"
        )
    else:
        out(f"{args.job_id} is already known (state {job.state}); nothing changed")
    return OK


def cmd_replay(ops: Ops, args: argparse.Namespace) -> int:
    reason = jobs.check_reason(args.reason)
    queue = JobQueue(ops.client("sqs"), ops.stack.names.queue_url)
    sweep_after = ops.sweep_after().seconds
    job = jobs.replay(ops.jobs, queue, args.job_id, ops.now(), sweep_after, reason)
    if as_json_output(args):
        dump(
            {
                "job_id": args.job_id,
                "state": "received",
                "replay": True,
                "queued": True,
                "replays": job.replays,
                "replay_reason": job.replay_reason,
            }
        )
    else:
        out(
            f"replay queued for {args.job_id}: state received, replay=true, "
            f"replays={job.replays}; the worker copies its artifacts again, "
            "with a fresh attempt budget"
        )
    return OK
