"""Pausing the work while intake goes on: the switches and the record of each pause.

The switches are what AWS itself starts the work with: the worker's SQS event
source mapping (the jobs queue), and for the poller its schedule rule and the
mapping of its shards queue (a round's assignments). They are found from the
queues the stack names, so a deployed stage and the local stack are one path.
Who paused, since when and why is a small SSM parameter per work (a tag could
not hold a free-text reason); the switches, not the record, say whether the
work is paused, so a switch turned by hand in the console is seen too.
See docs/operations.md, "Pausing the work".
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final

from botocore.exceptions import ClientError

from infra import spec
from sume_cli import OpsError
from sume_cli.context import Ops
from sume_cli.listing import list_jobs

WORKER: Final = "worker"
POLLER: Final = "poller"
WORKS: Final = (WORKER, POLLER)
MAPPING, RULE = "event source mapping", "schedule rule"
# A mapping in these states reads nothing, or soon will: its batches in flight finish.
_MAPPING_OFF = frozenset({"Disabled", "Disabling"})


@dataclass(frozen=True)
class Switch:
    kind: str
    """MAPPING or RULE."""
    name: str
    """The mapping's UUID, or the rule's name."""
    source: str
    """What it starts the work from: the queue's name, or the rule's schedule."""
    state: str
    """As AWS says it (a mapping's Enabled/Disabling/..., a rule's ENABLED/DISABLED)."""
    concurrency: int | None = None
    """A mapping's MaximumConcurrency, None when it has none (for people)."""

    @property
    def on(self) -> bool:
        if self.kind == MAPPING:
            return self.state not in _MAPPING_OFF
        return self.state != "DISABLED"

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "source": self.source, "state": self.state}


@dataclass(frozen=True)
class Record:
    since: int
    reason: str
    by: str

    def as_json(self) -> str:
        return json.dumps({"since": self.since, "reason": self.reason, "by": self.by})


@dataclass(frozen=True)
class WorkState:
    work: str
    switches: tuple[Switch, ...]
    record: Record | None

    @property
    def paused(self) -> bool:
        """Some switch is off: the work, or part of it, is not being started."""
        return any(not s.on for s in self.switches)

    @property
    def fully_paused(self) -> bool:
        return all(not s.on for s in self.switches)


def record_name(ops: Ops, work: str) -> str:
    """The SSM parameter of a work's pause: under the stack's name, or the local prefix."""
    base = spec.stack_name(ops.stage) if ops.stage else ops.prefix
    return f"/{base}/paused/{work}"


def _queue_url(ops: Ops, work: str) -> str:
    names = ops.stack.names
    url = names.queue_url if work == WORKER else names.shards_queue_url
    if not url:
        raise OpsError(
            f"{ops.stack.description} names no poller shards queue: "
            "its poller predates rounds; deploy the stack before pausing the poller"
        )
    return url


def _mappings(ops: Ops, queue_url: str) -> list[dict[str, Any]]:
    arn = ops.client("sqs").get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])[
        "Attributes"
    ]["QueueArn"]
    pages = ops.client("lambda").get_paginator("list_event_source_mappings")
    found = [m for page in pages.paginate(EventSourceArn=arn) for m in page["EventSourceMappings"]]
    if not found:
        raise OpsError(
            f"no event source mapping reads {arn.rsplit(':', 1)[-1]} in "
            f"{ops.stack.description}: is the stack deployed whole?"
        )
    return found


def _mapping_switch(mapping: dict[str, Any]) -> Switch:
    return Switch(
        MAPPING,
        mapping["UUID"],
        mapping["EventSourceArn"].rsplit(":", 1)[-1],
        mapping.get("State", ""),
        (mapping.get("ScalingConfig") or {}).get("MaximumConcurrency"),
    )


def _schedule_rules(ops: Ops, functions: set[str]) -> Iterator[Switch]:
    events = ops.client("events")
    for function in sorted(functions):
        # The rules that target the poller: its schedule (the only one with a
        # ScheduleExpression; registration events reach it through a queue).
        names = events.get_paginator("list_rule_names_by_target")
        for page in names.paginate(TargetArn=function):
            for name in page["RuleNames"]:
                rule = events.describe_rule(Name=name)
                if rule.get("ScheduleExpression"):
                    yield Switch(RULE, name, rule["ScheduleExpression"], rule.get("State", ""))


def switches(ops: Ops, work: str) -> tuple[Switch, ...]:
    """A work's switches, in the order a pause turns them off (a resume: reversed)."""
    mappings = _mappings(ops, _queue_url(ops, work))
    found = [_mapping_switch(m) for m in mappings]
    if work == WORKER:
        return tuple(found)
    rules = list(_schedule_rules(ops, {m["FunctionArn"] for m in mappings}))
    if not rules:
        raise OpsError(f"no schedule rule targets the poller in {ops.stack.description}")
    # The schedule first: no new round starts, then the one in flight stops.
    return (*rules, *found)


def read_records(ops: Ops) -> dict[str, Record]:
    names = {record_name(ops, work): work for work in WORKS}
    answer = ops.client("ssm").get_parameters(Names=sorted(names))
    records = {}
    for parameter in answer.get("Parameters", []):
        try:
            value = json.loads(parameter["Value"])
            record = Record(int(value["since"]), str(value["reason"]), str(value.get("by", "")))
        except (ValueError, KeyError, TypeError):
            # Not ours as written: say so rather than guess a time.
            record = Record(0, f"unreadable record {parameter['Name']}", "")
        records[names[parameter["Name"]]] = record
    return records


def read(ops: Ops, works: tuple[str, ...] = WORKS) -> list[WorkState]:
    records = read_records(ops)
    return [WorkState(work, switches(ops, work), records.get(work)) for work in works]


def write_record(ops: Ops, work: str, record: Record, replace: bool = False) -> Record:
    """The record, written unless one is there already (then that one: the first pause's).

    ``replace``: the one there is a pause's that ended (the work was turned back on
    by hand): this new pause writes its own.
    """
    ssm = ops.client("ssm")
    name = record_name(ops, work)
    try:
        ssm.put_parameter(Name=name, Value=record.as_json(), Type="String", Overwrite=replace)
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") != "ParameterAlreadyExists":
            raise
        return read_records(ops).get(work) or record
    return record


def delete_record(ops: Ops, work: str) -> None:
    try:
        ops.client("ssm").delete_parameter(Name=record_name(ops, work))
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") != "ParameterNotFound":
            raise


def turn(ops: Ops, switch: Switch, on: bool) -> Switch:
    """Turn one switch; returns it as AWS then says it is."""
    if switch.kind == MAPPING:
        answer = ops.client("lambda").update_event_source_mapping(UUID=switch.name, Enabled=on)
        return _mapping_switch(answer)
    events = ops.client("events")
    (events.enable_rule if on else events.disable_rule)(Name=switch.name)
    return Switch(RULE, switch.name, switch.source, "ENABLED" if on else "DISABLED")


def turn_all(
    ops: Ops, switches: tuple[Switch, ...], on: bool
) -> tuple[tuple[Switch, ...], list[str]]:
    """Each switch not yet so turned (a resume in reverse order); they all, and the turned."""
    order = reversed(switches) if on else iter(switches)
    now = {s.name: turn(ops, s, on) for s in order if s.on != on}
    return tuple(now.get(s.name, s) for s in switches), list(now)


def caller(ops: Ops) -> str:
    """Who is pausing, as AWS knows them (no permission is needed to ask)."""
    try:
        return str(ops.client("sts").get_caller_identity()["Arn"])
    except ClientError:
        return "unknown"


# Owed jobs counted for ``resume``: at most this many due-work entries are read.
MAX_COUNTED = 10_000


def owed_jobs(ops: Ops) -> tuple[int, bool]:
    """Jobs owed to the worker (received, or processing with a lease), from the due-work
    index: the jobs waiting, however many messages each has in the queue; and whether
    the count is complete (at most ``MAX_COUNTED``)."""
    listing = list_jobs(ops.jobs, "owed", None, MAX_COUNTED, None, ops.read_shards)
    return len(listing.jobs), listing.complete


def waiting(ops: Ops, work: str) -> int:
    """Messages the work's queue holds, waiting for it."""
    attributes = ops.client("sqs").get_queue_attributes(
        QueueUrl=_queue_url(ops, work), AttributeNames=["ApproximateNumberOfMessages"]
    )["Attributes"]
    return int(attributes.get("ApproximateNumberOfMessages", 0))
