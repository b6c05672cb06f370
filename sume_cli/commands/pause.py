"""``pause`` and ``resume``: stop and restart the worker or the poller, intake untouched;
and the lines ``status`` and ``report`` show while a work is paused."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from sume_cli import CHECK_FAILED, OK, USAGE, OpsError, jobs, pause
from sume_cli.context import Ops
from sume_cli.invocation import shell
from sume_cli.output import as_json_output, dump, note, out
from sume_cli.stackinfo import DiscoveryError
from sume_cli.times import iso


def _for(seconds: int) -> str:
    hours, rest = divmod(max(seconds, 0), 3600)
    return f"{hours}h {rest // 60:02d}m" if hours else f"{rest // 60}m"


def _resume(ops: Ops, work: str) -> list[str]:
    return ops.argv("resume", work)


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
    return f"{state.work} {what} {told}; resume: {shell(_resume(ops, state.work))}"


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
    next: dict[str, list[str]]
    """Each paused work's command that resumes it (argv)."""
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
        {s.work: _resume(ops, s.work) for s in off},
    )


def _pause_here(
    ops: Ops, work: str, reason: str, now: int
) -> tuple[pause.WorkState, list[str], str]:
    """Pause ``work`` in ``ops``'s region: its state after, the switches turned, the line."""
    (state,) = pause.read(ops, (work,))
    if state.fully_paused and state.record:
        return state, [], f"already: {describe(ops, state, now)}; nothing changed"
    # The record first: status, report and a person never see a pause without its why.
    # One there while every switch is on is of a pause that ended (resumed by hand).
    record = (state.record if state.paused else None) or pause.write_record(
        ops,
        work,
        pause.Record(now, reason, pause.caller(ops)),
        replace=state.record is not None,
    )
    turned, changed = pause.turn_all(ops, state.switches, on=False)
    state = pause.WorkState(work, turned, record)
    line = describe(ops, state, now)
    if any(s.state == "Disabling" for s in turned):
        line += "; batches in flight finish first"
    return state, changed, line


Acted = tuple[pause.WorkState, list[str], str]
"""A work's state after a pause or resume in one region, the switches turned, the line."""


def _elsewhere(
    ops: Ops, args: argparse.Namespace, act: Callable[[Ops], Acted], done: str
) -> tuple[list[dict[str, Any]], int]:
    """``act`` on the stage's other region, when it runs in two (docs/regions.md,
    "Pausing both regions"): a pause that holds in one region only does not hold, the
    other's poller sweeping this one's owed jobs to its own worker. Returns what each
    other region says, and 3 when one could not be reached or read."""
    regions = ops.other_regions
    if isinstance(regions, str):
        # Its poller unread (its stack, or no permission): a stage in one region, likely.
        note(
            f"could not tell whether the stage runs in a second region too ({regions}): "
            "if it does, run the same there (--region REGION)"
        )
        return [], OK
    said: list[dict[str, Any]] = []
    code = OK
    for region in regions:
        there = ops.in_region(region)
        try:
            state, changed, line = act(there)
        except (ClientError, BotoCoreError, OpsError, DiscoveryError) as exc:
            why = exc.response["Error"].get("Code") if isinstance(exc, ClientError) else exc
            if done == "paused":
                meant = (
                    "while its work runs, its poller may sweep this region's owed jobs to "
                    "a worker that runs"
                )
            else:
                meant = "its work stays paused there"
            verb = done.removesuffix("d")
            note(f"not {done} in {region}: {why}; {meant}: {verb} it there (--region {region})")
            code = CHECK_FAILED
            continue
        said.append({"region": region, **_state_json(state), "changed": changed})
        if not as_json_output(args):
            out(f"also {done} in {region} (the stage's other region): {line}")
    return said, code


def cmd_pause(ops: Ops, args: argparse.Namespace) -> int:
    reason = jobs.check_reason(args.reason)
    if reason is None:
        raise OpsError("--reason: say why (it is shown until the work resumes)", USAGE)
    now = ops.now()
    state, changed, line = _pause_here(ops, args.work, reason, now)
    if not as_json_output(args):
        out(line)
    others, code = _elsewhere(
        ops, args, lambda there: _pause_here(there, args.work, reason, now), "paused"
    )
    if as_json_output(args):
        # While paused: the argv that resumes it, as the line says.
        resume = _resume(ops, state.work) if state.paused else None
        dump({**_state_json(state), "changed": changed, "other_regions": others, "resume": resume})
    return code


def _resume_here(
    ops: Ops, work: str, now: int, count: bool
) -> tuple[pause.WorkState, list[str], str]:
    """Resume ``work`` in ``ops``'s region; ``count``: say what waits for it."""
    (state,) = pause.read(ops, (work,))
    if not state.paused and state.record is None:
        return state, [], f"{work} is not paused: nothing to resume"
    # Counted while nothing reads the queue: once a mapping is on, its first batch can
    # be in flight (not visible) before the count, and the line would undercount.
    waiting = pause.waiting(ops, work)
    jobs = pause.owed_jobs(ops) if count and work == pause.WORKER else None
    # In reverse: the poller's shards mapping reads again before its schedule ticks.
    turned, changed = pause.turn_all(ops, state.switches, on=True)
    pause.delete_record(ops, work)
    record = state.record
    if not changed:
        line = f"{work} was running already (resumed by hand): removed its pause record"
    elif record is None:
        line = f"{work} resumed (it was paused by hand, no record of when or why)"
    else:
        line = f"{work} resumed after {_for(now - record.since)} ({record.reason})"
    mappings = [s for s in turned if s.kind == pause.MAPPING]
    caps = {s.concurrency for s in mappings}
    if jobs is None:
        line += f"; {waiting} message(s) waiting in {mappings[0].source}"
    else:
        # Jobs, not messages: a job resent or swept while paused has several.
        count_, complete = jobs
        line += f"; {count_}{'' if complete else '+'} job(s) waiting"
        if waiting != count_:
            line += f" ({waiting} message(s) in {mappings[0].source})"
    if caps != {None}:
        line += f", worked at the mapping's maximum concurrency {max(c or 0 for c in caps)}"
    return pause.WorkState(work, turned, None), changed, line


def cmd_resume(ops: Ops, args: argparse.Namespace) -> int:
    now = ops.now()
    state, changed, line = _resume_here(ops, args.work, now, count=True)
    if not as_json_output(args):
        out(line)
    # The jobs owed are the one table's: counted once, here.
    others, code = _elsewhere(
        ops, args, lambda there: _resume_here(there, args.work, now, count=False), "resumed"
    )
    if as_json_output(args):
        dump({**_state_json(state), "changed": changed, "other_regions": others, "resume": None})
    return code
