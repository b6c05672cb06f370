"""``pause`` and ``resume``: stop and restart the worker or the poller, intake untouched;
and the lines ``status`` and ``report`` show while a work is paused."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from sume_cli import OK, USAGE, OpsError, jobs, pause
from sume_cli.commands import PROG, deployment_option
from sume_cli.context import Ops
from sume_cli.output import as_json_output, dump, note, out
from sume_cli.times import iso


def _for(seconds: int) -> str:
    hours, rest = divmod(max(seconds, 0), 3600)
    return f"{hours}h {rest // 60:02d}m" if hours else f"{rest // 60}m"


def _resume_hint(ops: Ops, work: str) -> str:
    return f"{PROG} {deployment_option(ops)} resume {work}"


def describe(ops: Ops, state: pause.WorkState, now: int) -> str:
    """One line: what is paused, since when, by whom and why, and how to resume."""
    off = [s for s in state.switches if not s.on]
    what = "paused" if state.fully_paused else f"part paused ({len(off)} of {len(state.switches)})"
    record = state.record
    if record is None:
        told = "by hand (no record of when or why)"
    else:
        since = f"{iso(record.since)} ({_for(now - record.since)})" if record.since else "?"
        told = f"since {since} by {record.by or 'unknown'}: "
        told += record.reason
    return f"{state.work} {what} {told}; resume: {_resume_hint(ops, state.work)}"


def _state_json(state: pause.WorkState) -> dict[str, Any]:
    record = state.record
    return {
        "work": state.work,
        "paused": state.paused,
        "since": iso(record.since) if record and record.since else None,
        "reason": record.reason if record else None,
        "by": record.by if record else None,
        "switches": [s.as_dict() for s in state.switches],
    }


@dataclass(frozen=True)
class Paused:
    """What ``status`` and ``report`` show of the pauses: nothing while all work runs."""

    lines: list[str]
    states: list[dict[str, Any]]
    next: dict[str, str]
    """Each paused work's command that resumes it."""
    unknown: str | None = None
    """Why the switches could not be read (a stack without them, or no permission)."""

    def show(self) -> None:
        for line in self.lines:
            note(f"paused: {line}")
        if self.unknown:
            note(f"could not tell whether the work is paused: {self.unknown}")


def paused(ops: Ops) -> Paused:
    try:
        states = pause.read(ops)
    except (ClientError, OpsError) as exc:
        why = exc.response["Error"].get("Code") if isinstance(exc, ClientError) else exc
        return Paused([], [], {}, str(why))
    now = ops.now()
    off = [s for s in states if s.paused]
    return Paused(
        [describe(ops, s, now) for s in off],
        [_state_json(s) for s in off],
        {s.work: _resume_hint(ops, s.work) for s in off},
    )


def _show(args: argparse.Namespace, state: pause.WorkState, changed: list[str], line: str) -> None:
    if as_json_output(args):
        dump({**_state_json(state), "changed": changed})
    else:
        out(line)


def cmd_pause(ops: Ops, args: argparse.Namespace) -> int:
    reason = jobs.check_reason(args.reason)
    if reason is None:
        raise OpsError("--reason: say why (it is shown until the work resumes)", USAGE)
    now = ops.now()
    (state,) = pause.read(ops, (args.work,))
    if state.fully_paused and state.record:
        _show(args, state, [], f"already: {describe(ops, state, now)}; nothing changed")
        return OK
    # The record first: status, report and a person never see a pause without its why.
    record = state.record or pause.write_record(
        ops, args.work, pause.Record(now, reason, pause.caller(ops))
    )
    turned, changed = pause.turn_all(ops, state.switches, on=False)
    state = pause.WorkState(args.work, turned, record)
    line = describe(ops, state, now)
    if any(s.state == "Disabling" for s in turned):
        line += "; batches in flight finish first"
    _show(args, state, changed, line)
    return OK


def cmd_resume(ops: Ops, args: argparse.Namespace) -> int:
    now = ops.now()
    (state,) = pause.read(ops, (args.work,))
    if not state.paused and state.record is None:
        _show(args, state, [], f"{args.work} is not paused: nothing to resume")
        return OK
    # Counted while nothing reads the queue: once a mapping is on, its first batch can
    # be in flight (not visible) before the count, and the line would undercount.
    waiting = pause.waiting(ops, args.work)
    # In reverse: the poller's shards mapping reads again before its schedule ticks.
    turned, changed = pause.turn_all(ops, state.switches, on=True)
    pause.delete_record(ops, args.work)
    record = state.record
    if not changed:
        line = f"{args.work} was running already (resumed by hand): removed its pause record"
    elif record is None:
        line = f"{args.work} resumed (it was paused by hand, no record of when or why)"
    else:
        line = f"{args.work} resumed after {_for(now - record.since)} ({record.reason})"
    mappings = [s for s in turned if s.kind == pause.MAPPING]
    caps = {s.concurrency for s in mappings}
    line += f"; {waiting} message(s) waiting in {mappings[0].source}"
    if caps != {None}:
        line += f", worked at the mapping's maximum concurrency {max(c or 0 for c in caps)}"
    _show(args, pause.WorkState(args.work, turned, None), changed, line)
    return OK
