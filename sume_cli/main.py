"""``sume-webhooks``: the operator's CLI, against a deployed stage or the local stack.

A thin layer: argparse, one small function per command over ``sume_cli``,
and one place (``main``) that turns expected failures into a one-line message
on stderr and an exit code. See docs/cli.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from importlib.metadata import version as package_version
from typing import Any

import boto3
import botocore
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    EndpointConnectionError,
    NoCredentialsError,
    NoRegionError,
    ProfileNotFound,
)

from infra.spec import DEFAULT_POLL_RATE_MINUTES, OUTPUT_WEBHOOK_URL
from sume.contract.envelope import TERMINAL_EVENTS
from sume.core.errors import ConfigurationError
from sume.core.ids import InvalidJobId, check_job_id
from sume.core.names import DUE_SHARDS, Env, Metric
from sume.core.secrets import parse_secrets
from sume.store.queue import JobQueue
from sume_cli import (
    CHECK_FAILED,
    FAILED,
    OK,
    USAGE,
    OpsError,
    dlq,
    jobs,
    owed,
    report,
    rotation,
)
from sume_cli.context import LOCAL_ENDPOINT_HINT, Ops, not_an_aws_api
from sume_cli.listing import DEFAULT_STATE, SCANNED, STATES, list_jobs
from sume_cli.sendtest import MAX_SHOWN_BODY, send
from sume_cli.stackinfo import LOCAL_PREFIX, DiscoveryError
from sume_cli.story import as_json, exact_json, render
from sume_cli.times import iso, parse_duration, parse_since

PROG = "sume-webhooks"
# Job ids a hint names before it says "and N more".
MAX_LISTED_JOBS = 10
# A job still due this long after its due time is overdue: the poller, on its
# default schedule, has let two runs pass without acting on it.
DEFAULT_OVERDUE_AFTER = f"{2 * DEFAULT_POLL_RATE_MINUTES}m"
Command = Callable[[Ops, argparse.Namespace], int]
JSON, TABLE = "json", "table"


def out(text: str = "") -> None:
    print(text, file=sys.stdout)


def note(text: str) -> None:
    print(text, file=sys.stderr)


def dump(value: Any) -> None:
    out(exact_json(value, default=str, indent=2, ensure_ascii=False, sort_keys=True))


def as_json_output(args: argparse.Namespace) -> bool:
    return bool(args.output == JSON)


def version() -> str:
    return (
        f"{PROG} {package_version('sume-webhooks')} Python/{platform.python_version()} "
        f"boto3/{boto3.__version__} botocore/{botocore.__version__}"
    )


def table(rows: list[list[str]], header: list[str]) -> None:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        out("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())


def deployment_option(ops: Ops) -> str:
    if ops.endpoint_url:
        return f"--endpoint-url {ops.endpoint_url}"
    return f"--stage {ops.stage}"


def cmd_status(ops: Ops, args: argparse.Namespace) -> int:
    job = jobs.load(ops.jobs, args.job_id)
    if as_json_output(args):
        dump(as_json(job))
    else:
        out(render(job))
    return OK


def cmd_list(ops: Ops, args: argparse.Namespace) -> int:
    state = args.state or DEFAULT_STATE
    since = parse_since(args.since, time.time()) if args.since else None
    listing = list_jobs(ops.jobs, state, since, args.limit, args.scan_budget if args.scan else None)
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
    window = _report_window(args, int(time.time()))
    found = report.report(ops.jobs, window, args.limit)
    problems = found.problems
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
                "problems": [f"{kind} {listed.count}" for kind, listed in problems.items()],
                "next": steps,
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
    if args.check and problems:
        failed = (
            f"{kind} {listed.count} (next: {steps[kind]})" for kind, listed in problems.items()
        )
        note(f"check failed: {', '.join(failed)}")
        return CHECK_FAILED
    return OK


def cmd_announce_owed(ops: Ops, args: argparse.Namespace) -> int:
    now = int(time.time())
    queue = JobQueue(ops.client("sqs"), ops.stack.names.queue_url)
    found = owed.announce_owed(ops.jobs, queue, _report_window(args, now), now, args.dry_run)
    if as_json_output(args):
        dump(found.as_dict())
    elif found.jobs:
        table(found.rows(), owed.HEADER)
    note(owed.summary(found, f"{PROG} {deployment_option(ops)}", args))
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
    job = jobs.replay(ops.jobs, queue, args.job_id, int(time.time()), reason)
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


def _registrations_dlq(ops: Ops) -> tuple[str, str]:
    names = ops.stack.names
    if not (names.registrations_dlq_url and names.registrations_queue_url):
        raise OpsError(
            f"{ops.stack.description} has no registrations queue and DLQ "
            "(deployed before registration by event)"
        )
    return names.registrations_dlq_url, names.registrations_queue_url


def _dlq_url(ops: Ops, args: argparse.Namespace) -> str:
    return _registrations_dlq(ops)[0] if args.registrations else ops.stack.names.dlq_url


def cmd_dlq_peek(ops: Ops, args: argparse.Namespace) -> int:
    sqs = ops.client("sqs")
    url = _dlq_url(ops, args)
    shown: list[dlq.DeadLetter] | list[dlq.ParkedRegistration]
    if args.registrations:
        shown, header = dlq.peek_registrations(sqs, url, args.limit), dlq.REGISTRATION_HEADER
    else:
        shown, header = dlq.peek(sqs, ops.jobs, url, args.limit), dlq.JOB_HEADER
    if as_json_output(args):
        dump([message.as_dict() for message in shown])
    elif shown:
        table([message.row() for message in shown], header)
    else:
        out(f"the {'registrations ' if args.registrations else ''}DLQ is empty")
    note(
        f"{len(shown)} shown; about {dlq.depth(sqs, url)} message(s) in {url} "
        "(SQS counts each peek as a receive)"
    )
    return OK


def _redriven_jobs(ops: Ops, letters: list[dlq.DeadLetter]) -> list[str]:
    """What to do after a jobs DLQ redrive, each said once."""
    where = f"{PROG} {deployment_option(ops)}"
    finished = [letter.job_id for letter in letters if letter.finished]
    steps = []
    if len(finished) < len(letters):
        steps.append(
            f"The worker takes the jobs again; `{where} list --state owed` shows those not "
            f"done yet, `{where} dlq peek` any that failed again."
        )
    if finished:
        shown = ", ".join(finished[:MAX_LISTED_JOBS])
        more = (
            f" and {len(finished) - MAX_LISTED_JOBS} more"
            if len(finished) > MAX_LISTED_JOBS
            else ""
        )
        steps.append(
            f"{len(finished)} of them are finished (processed or processing_error) and the "
            f"worker leaves them alone: {shown}{more}. `{where} replay JOB_ID` redoes one's work."
        )
    return steps


def cmd_dlq_redrive(ops: Ops, args: argparse.Namespace) -> int:
    sqs = ops.client("sqs")
    moved: list[dlq.DeadLetter] | list[dlq.ParkedRegistration]
    if args.registrations:
        dlq_url, queue_url = _registrations_dlq(ops)
        moved = dlq.redrive_registrations(sqs, dlq_url, queue_url, args.limit)
        header, target = dlq.REGISTRATION_HEADER, "registrations queue"
        steps = [
            f"The poller registers them from the registrations queue; any refused again comes "
            f"back with its reason: `{PROG} {deployment_option(ops)} dlq peek --registrations`."
        ]
    else:
        names = ops.stack.names
        letters = dlq.redrive(sqs, ops.jobs, names.dlq_url, names.queue_url, args.limit)
        moved, header, target = letters, dlq.JOB_HEADER, "jobs queue"
        steps = _redriven_jobs(ops, letters)
    if as_json_output(args):
        dump({"moved": [message.as_dict() for message in moved]})
    elif moved:
        table([message.row() for message in moved], header)
    say = note if as_json_output(args) else out
    say(f"moved {len(moved)} message(s) back to the {target}")
    if moved:
        for step in steps:
            say(step)
    return OK


def _signing_secrets(ops: Ops, args: argparse.Namespace) -> list[bytes]:
    if args.secret:
        return [s.encode("utf-8") for s in args.secret]
    if value := os.environ.get(Env.SUME_COM_WEBHOOK_SIGNING_SECRET, "").strip():
        return list(parse_secrets(value))
    if not (ops.stage or ops.endpoint_url):
        raise OpsError(
            "no signing secret: pass --secret, set SUME_COM_WEBHOOK_SIGNING_SECRET, or name "
            "the deployment (--stage / --endpoint-url) to read it from Secrets Manager",
            USAGE,
        )
    arn = _secret_arn(ops)
    return [s.encode("utf-8") for s in rotation.read(ops.client("secretsmanager"), arn)]


def cmd_send_test(ops: Ops, args: argparse.Namespace) -> int:
    url = args.url
    if not url:
        if not ops.stage:
            raise OpsError(
                f"no URL: pass the webhook URL, or --stage to use its {OUTPUT_WEBHOOK_URL}", USAGE
            )
        url = ops.stack.webhook_url
        if not url:
            raise OpsError(f"{ops.stack.description} has no {OUTPUT_WEBHOOK_URL} output")
    answers = send(url, _signing_secrets(ops, args), args.job, args.event, args.artifact)
    shown = [(a, a.body[:MAX_SHOWN_BODY]) for a in answers]
    if as_json_output(args):
        dump([{"sent": a.label, "status": a.status, "body": body} for a, body in shown])
    else:
        for answer, body in shown:
            cut = "..." if len(answer.body) > len(body) else ""
            out(f"{answer.label} -> {answer.status} {body}{cut}".rstrip())
    failed = [a.label for a in answers if not a.ok]
    if failed:
        note(f"not accepted: {', '.join(failed)} (see the status and body above)")
        return CHECK_FAILED
    return OK


def _secret_arn(ops: Ops) -> str:
    arn = ops.stack.names.signing_secret_arn
    if not arn:
        raise OpsError(
            f"{ops.stack.description} keeps no signing secret in Secrets Manager "
            "(its receiver reads SUME_COM_WEBHOOK_SIGNING_SECRET)"
        )
    return arn


def _positions(secrets: list[str], new: str | None = None) -> list[dict[str, Any]]:
    return [
        {"position": position, "fingerprint": rotation.fingerprint(secret), "new": secret == new}
        for position, secret in enumerate(secrets)
    ]


def _show_positions(positions: list[dict[str, Any]]) -> None:
    for p in positions:
        out(f"  {p['position']}  {p['fingerprint']}{'  (new)' if p['new'] else ''}")


STDIN = "-"


def cmd_secrets_rotate(ops: Ops, args: argparse.Namespace) -> int:
    # "-" keeps the secret out of the shell history and the process list.
    new = sys.stdin.readline() if args.new_secret == STDIN else args.new_secret
    arn = _secret_arn(ops)
    secrets = rotation.rotate(ops.client("secretsmanager"), arn, new)
    positions = _positions(secrets, new.strip())
    next_steps = [
        "Give Sume the new secret; the receiver accepts both meanwhile.",
        rotation.metric_hint(len(secrets) - 1, deployment_option(ops)),
        f"Then: {PROG} {deployment_option(ops)} secrets retire",
    ]
    if as_json_output(args):
        dump({"secret_arn": arn, "secrets": positions})
        for line in next_steps:
            note(line)
    else:
        out(f"{arn} now holds {len(secrets)} secrets, newest first:")
        _show_positions(positions)
        for line in next_steps:
            out(line)
    return OK


def cmd_secrets_retire(ops: Ops, args: argparse.Namespace) -> int:
    arn = _secret_arn(ops)
    retired, remaining = rotation.retire(ops.client("secretsmanager"), arn, args.position)
    positions = _positions(remaining)
    if as_json_output(args):
        dump({"secret_arn": arn, "retired": rotation.fingerprint(retired), "secrets": positions})
    else:
        out(f"retired {rotation.fingerprint(retired)}; {arn} now holds:")
        _show_positions(positions)
    return OK


def cmd_secrets_status(ops: Ops, args: argparse.Namespace) -> int:
    arn = _secret_arn(ops)
    secrets = rotation.read(ops.client("secretsmanager"), arn)
    now = datetime.now(UTC)
    # The end reaches into the next minute, so the current minute's deliveries count.
    start, end = now - timedelta(hours=args.hours), now + timedelta(minutes=1)
    usage = rotation.usage(ops.client("cloudwatch"), secrets, start, end)
    if as_json_output(args):
        positions = [
            {
                "position": u.position,
                "fingerprint": u.fingerprint,
                "metric": Metric.signature_secret(u.position),
                "matches": u.matches,
            }
            for u in usage
        ]
        dump({"secret_arn": arn, "hours": args.hours, "positions": positions})
        return OK
    out(f"{arn}: deliveries verified per position in the last {args.hours} h")
    table(
        [
            [
                str(u.position),
                u.fingerprint,
                Metric.signature_secret(u.position),
                "no data" if u.matches is None else f"{u.matches:g}",
            ]
            for u in usage
        ],
        ["POSITION", "FINGERPRINT", "METRIC", "MATCHES"],
    )
    return OK


def _global_options(parser: argparse.ArgumentParser, default: Any) -> None:
    """Accepted before or after the command (the command's copy must not reset them)."""
    group = parser.add_argument_group("deployment and output")
    group.add_argument(
        "--stage", default=default, help="deployed stage: resources from its stack outputs"
    )
    group.add_argument(
        "--endpoint-url",
        default=default,
        help="the local stack's moto endpoint, e.g. http://127.0.0.1:5000 "
        "(default: AWS_ENDPOINT_URL, unless --stage)",
    )
    group.add_argument(
        "--profile", default=default, help="AWS profile (default: AWS_PROFILE, else default)"
    )
    group.add_argument(
        "--region", default=default, help="AWS region (default: AWS_REGION, else AWS config)"
    )
    group.add_argument(
        "--output",
        choices=(TABLE, JSON),
        default=default if default is argparse.SUPPRESS else TABLE,
        help="table (for people, the default) or json (for scripts)",
    )
    group.add_argument(
        "--prefix",
        default=default,
        help=f"name prefix of the local stack's resources (default {LOCAL_PREFIX})",
    )
    group.add_argument(
        "--shards",
        type=int,
        default=default,
        help=f"shards of the due-work index (default: DUE_SHARDS, else {DUE_SHARDS})",
    )


def json_alias(parser: argparse.ArgumentParser, help_text: str = "same as --output json") -> None:
    parser.add_argument(
        "--json",
        dest="output",
        action="store_const",
        const=JSON,
        default=argparse.SUPPRESS,
        help=help_text,
    )


def _report_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--since", default="24h", help="30m, 2h, 7d, or an ISO time (UTC); default 24h"
    )
    parser.add_argument(
        "--limit", type=int, default=10, help="job ids listed per kind (10); the rest are counted"
    )
    parser.add_argument(
        "--overdue-after",
        default=DEFAULT_OVERDUE_AFTER,
        metavar="DURATION",
        help=f"a job still due this long past its due time is overdue ({DEFAULT_OVERDUE_AFTER})",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="exit 3 when a job in the window is lost, in processing_error, parked or overdue",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Operate the Sume webhook receiver: jobs, DLQ, test deliveries, secrets.",
        epilog="Exit codes: 0 ok, 1 failed, 2 usage, 3 send-test not accepted by the endpoint "
        "or report --check found lost, processing_error, parked or overdue jobs.",
    )
    _global_options(parser, None)
    parser.add_argument("--version", action="version", version=version())
    common = argparse.ArgumentParser(add_help=False)
    _global_options(common, argparse.SUPPRESS)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(
        group: Any, name: str, run: Command | None, help_text: str
    ) -> argparse.ArgumentParser:
        sub: argparse.ArgumentParser = group.add_parser(
            name, parents=[common], help=help_text, description=help_text
        )
        if run:
            sub.set_defaults(run=run)
        return sub

    status = command(commands, "status", cmd_status, "a job's whole story from its item")
    status.add_argument("job_id", metavar="JOB_ID")
    json_alias(status, "the item as JSON (times in ISO UTC)")

    listing = command(commands, "list", cmd_list, "jobs in a state (default: unfinished ones)")
    listing.add_argument(
        "--state",
        choices=STATES,
        help=f"default {DEFAULT_STATE}: awaiting and owed jobs, all the due-work index holds",
    )
    listing.add_argument("--since", help="30m, 2h, 7d, or an ISO time (UTC)")
    listing.add_argument("--limit", type=int, default=50, help="at most this many jobs (50)")
    listing.add_argument(
        "--scan",
        action="store_true",
        help="allow a bounded Scan for states in no index (processed, failed, lost, ...)",
    )
    listing.add_argument(
        "--scan-budget", type=int, default=1000, help="items a Scan may read (1000)"
    )
    json_alias(listing)

    _report_options(
        command(
            commands, "report", cmd_report, "how every job since a time ended: counts and job ids"
        )
    )

    owed.add_options(
        command(commands, "announce-owed", cmd_announce_owed, "announce lost jobs never announced")
    )

    expect = command(commands, "expect", cmd_expect, "register a submitted job for status polling")
    expect.add_argument("job_id", metavar="JOB_ID")
    expect.add_argument("status_url", metavar="STATUS_URL")
    expect.add_argument(
        "--metadata", action="append", default=[], metavar="KEY=VALUE", help="repeatable"
    )

    replay = command(
        commands, "replay", cmd_replay, "redo a finished job's follow-up work (re-copy artifacts)"
    )
    replay.add_argument("job_id", metavar="JOB_ID")
    replay.add_argument("--reason", metavar="TEXT", help="why, kept on the item (e.g. the fix)")

    dlq_parser = command(commands, "dlq", None, "the dead-letter queues (jobs, registrations)")
    dlq_commands = dlq_parser.add_subparsers(dest="dlq_command", required=True, metavar="ACTION")
    peek = command(
        dlq_commands,
        "peek",
        cmd_dlq_peek,
        "show DLQ messages and why each is there (SQS counts each peek as a receive)",
    )
    peek.add_argument("--limit", type=int, default=10, help="at most this many messages (10)")
    json_alias(peek)
    redrive = command(
        dlq_commands, "redrive", cmd_dlq_redrive, "move DLQ messages back to their queue"
    )
    redrive.add_argument("--limit", type=int, default=100, help="at most this many messages (100)")
    for action in (peek, redrive):
        action.add_argument(
            "--registrations",
            action="store_true",
            help="the registrations DLQ (refused or failed registration events), not the jobs DLQ",
        )

    send_test = command(
        commands, "send-test", cmd_send_test, "send a signed webhook.test (and a job event)"
    )
    send_test.add_argument(
        "url",
        nargs="?",
        metavar="URL",
        help=f"webhook URL (default: the stage's {OUTPUT_WEBHOOK_URL})",
    )
    send_test.add_argument(
        "--secret",
        action="append",
        help="signing secret, repeatable (default: SUME_COM_WEBHOOK_SIGNING_SECRET, "
        "else the deployment's secret in Secrets Manager)",
    )
    send_test.add_argument("--job", metavar="JOB_ID", help="also send a terminal event for it")
    send_test.add_argument("--event", choices=list(TERMINAL_EVENTS), default="job.completed")
    send_test.add_argument(
        "--artifact", action="append", default=[], metavar="URL", help="for job.completed"
    )

    secrets_parser = command(commands, "secrets", None, "rotate the signing secret")
    secrets_commands = secrets_parser.add_subparsers(
        dest="secrets_command", required=True, metavar="ACTION"
    )
    rotate = command(
        secrets_commands, "rotate", cmd_secrets_rotate, "add a new secret before the current one"
    )
    rotate.add_argument(
        "--new-secret", required=True, metavar="VALUE", help="the new secret, or - for stdin"
    )
    retire = command(
        secrets_commands, "retire", cmd_secrets_retire, "remove an old secret (never the last)"
    )
    retire.add_argument("--position", type=int, help="which one (default: the oldest, last)")
    command(
        secrets_commands, "status", cmd_secrets_status, "deliveries each secret verified"
    ).add_argument("--hours", type=int, default=24, help="window, in hours (24)")
    return parser


def _aws_error(exc: ClientError) -> str:
    error = exc.response.get("Error", {})
    return f"AWS refused {exc.operation_name}: {error.get('Code')}: {error.get('Message')}"


def run(args: argparse.Namespace) -> int:
    if args.stage and args.endpoint_url:
        raise OpsError("pass either --stage or --endpoint-url, not both", USAGE)
    # As the AWS CLI: AWS_ENDPOINT_URL names where the calls go. Without a
    # --stage that is the local stack; with one, the stack is found through
    # CloudFormation at that endpoint (boto3 honours the variable itself).
    endpoint = args.endpoint_url
    if not args.stage and not endpoint:
        endpoint = os.environ.get("AWS_ENDPOINT_URL", "").strip() or None
    if (job_id := getattr(args, "job_id", None)) is not None:
        try:
            check_job_id(job_id)
        except InvalidJobId as exc:
            raise OpsError(f"JOB_ID: {exc}", USAGE) from None
    ops = Ops(
        stage=args.stage,
        endpoint_url=endpoint,
        # AWS_REGION: the AWS CLI and SDKs read it; botocore only AWS_DEFAULT_REGION.
        region=args.region or os.environ.get("AWS_REGION", "").strip() or None,
        prefix=args.prefix or LOCAL_PREFIX,
        shards=args.shards or int(os.environ.get(Env.DUE_SHARDS) or DUE_SHARDS),
        profile=args.profile,
    )
    command: Command = args.run
    try:
        return command(ops, args)
    except ClientError as exc:
        if (mistake := not_an_aws_api(exc, ops.endpoint_url)) is not None:
            raise mistake from None
        raise
    except EndpointConnectionError as exc:
        if ops.endpoint_url:
            raise OpsError(
                f"cannot reach {exc.kwargs.get('endpoint_url')}: is the local stack up? "
                f"Use {LOCAL_ENDPOINT_HINT}"
            ) from None
        raise


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exit_:
        # argparse already printed help, the version or the usage error.
        return exit_.code if isinstance(exit_.code, int) else USAGE
    try:
        return run(args)
    except OpsError as exc:
        message, code = str(exc), exc.exit_code
    except (DiscoveryError, ConfigurationError) as exc:
        message, code = str(exc), FAILED
    except NoCredentialsError:
        message, code = "no AWS credentials found (AWS_PROFILE, environment or SSO)", FAILED
    except ProfileNotFound as exc:
        message = (
            f"no AWS profile {exc.kwargs.get('profile')!r} (--profile or AWS_PROFILE): "
            "`aws configure list-profiles` shows the ones there are"
        )
        code = FAILED
    except NoRegionError:
        message, code = "no AWS region: pass --region or set AWS_REGION", FAILED
    except EndpointConnectionError as exc:
        message, code = f"cannot reach {exc.kwargs.get('endpoint_url')}", FAILED
    except ClientError as exc:
        message, code = _aws_error(exc), FAILED
    except BotoCoreError as exc:
        message, code = f"AWS call failed: {exc}", FAILED
    except KeyboardInterrupt:
        return 130
    note(f"{PROG}: {message}")
    return code


if __name__ == "__main__":
    sys.exit(main())
