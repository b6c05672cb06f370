"""``dlq peek`` and ``dlq redrive``, of the jobs DLQ or the registrations DLQ."""

from __future__ import annotations

import argparse

from sume_cli import OK, OpsError, dlq
from sume_cli.commands import MAX_LISTED_JOBS
from sume_cli.context import Ops
from sume_cli.invocation import Step, shell
from sume_cli.output import as_json_output, dump, note, out, table


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


def _redriven_jobs(ops: Ops, letters: list[dlq.DeadLetter]) -> tuple[list[str], list[Step]]:
    """What to do after a jobs DLQ redrive, each said once: as lines, and as steps."""
    finished = [letter.job_id for letter in letters if letter.finished]
    lines, steps = [], []
    if len(finished) < len(letters):
        owed = Step(ops.argv("list", "--state", "owed"), "the jobs not done yet")
        again = Step(ops.argv("dlq", "peek"), "any that failed again")
        steps += [owed, again]
        lines.append(
            f"The worker takes the jobs again; `{shell(owed.argv)}` shows those not done yet, "
            f"`{shell(again.argv)}` any that failed again."
        )
    if finished:
        shown = ", ".join(finished[:MAX_LISTED_JOBS])
        more = (
            f" and {len(finished) - MAX_LISTED_JOBS} more"
            if len(finished) > MAX_LISTED_JOBS
            else ""
        )
        replay = Step(ops.argv("replay", finished[0]), "redoes a finished job's work")
        steps.append(replay)
        lines.append(
            f"{len(finished)} of them are finished (processed or processing_error) and the "
            f"worker leaves them alone: {shown}{more}. `{shell(replay.argv)}` redoes "
            "one's work."
        )
    return lines, steps


def cmd_dlq_redrive(ops: Ops, args: argparse.Namespace) -> int:
    sqs = ops.client("sqs")
    moved: list[dlq.DeadLetter] | list[dlq.ParkedRegistration]
    if args.registrations:
        dlq_url, queue_url = _registrations_dlq(ops)
        moved = dlq.redrive_registrations(sqs, dlq_url, queue_url, args.limit)
        header, target = dlq.REGISTRATION_HEADER, "registrations queue"
        steps = [Step(ops.argv("dlq", "peek", "--registrations"), "any refused again")]
        lines = [
            f"The poller registers them from the registrations queue; any refused again comes "
            f"back with its reason: `{shell(steps[0].argv)}`."
        ]
    else:
        names = ops.stack.names
        letters = dlq.redrive(sqs, ops.jobs, names.dlq_url, names.queue_url, args.limit)
        moved, header, target = letters, dlq.JOB_HEADER, "jobs queue"
        lines, steps = _redriven_jobs(ops, letters)
    if not moved:
        steps = []
    if as_json_output(args):
        next_steps = [step.as_dict() for step in steps]
        dump({"moved": [message.as_dict() for message in moved], "next": next_steps})
    elif moved:
        table([message.row() for message in moved], header)
    say = note if as_json_output(args) else out
    say(f"moved {len(moved)} message(s) back to the {target}")
    if moved:
        for line in lines:
            say(line)
    return OK
