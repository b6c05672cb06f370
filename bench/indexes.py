"""Index writes per job: what each DynamoDB write of a job's life costs each index of the table.

The real handlers (and the ops CLI's replay) run each job's life on moto in
process. Every ``PutItem`` and ``UpdateItem`` of the jobs table is watched on
botocore's ``before-parameter-build`` and ``after-call``: the item is read before and
after by a client of the bench's own (not watched), and for each index of
``spec.table_definition`` the entry each image makes (none when it lacks a
key of the index; the index's projection of it otherwise) is compared as
DynamoDB's rules for global secondary indexes say: an entry added or removed
is one index write, a changed key two (a delete and a put), a changed
projected attribute one, anything else none (a failed conditional write
changes nothing). Each index write costs one write unit per started KB of
the entry, counted with DynamoDB's item size rules plus the 100 bytes it adds
to every index entry (so rounded up, never down). The index as it was
(``due-work``, ALL) is priced on the same writes beside the deployed ones.

Each life runs to its end as deployed: a poll is the schedule's tick and then
every assignment it put on the shards queue, one poller run each, and what a
run queues is worked by the worker; the item's last state is the life's
ending. moto writes no index entry at all (it filters the table when an
index is read), so the count is this module's, by DynamoDB's rules.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from botocore import handlers

from bench import cost, rounds
from bench import deliveries as d
from bench.env import environment
from bench.report import Targets, table
from bench.runtime import silenced
from devstack.lambda_context import LambdaContext
from devstack.resources import queue_arn
from infra import spec
from sume.core import runtime
from sume.core.names import (
    DUE_AT,
    DUE_INDEX,
    DUE_INDEX_BEFORE,
    DUE_SHARDS,
    JOB_ID,
    REPORT_BUCKET,
    REPORT_INDEX,
    Env,
)
from sume.store.sizing import item_size

INDEX_ENTRY_OVERHEAD_BYTES = 100
WRITES = ("PutItem", "UpdateItem")
PHASES = ("receiver", "worker", "poller", "registration", "ops CLI")
ENDED = ("processed", "processing_error", "lost")


def _entry(item: dict[str, Any] | None, index: dict[str, Any]) -> dict[str, Any] | None:
    """The index's entry for ``item`` (attribute values as stored); None when not in it."""
    if item is None:
        return None
    keys = [k["AttributeName"] for k in index["KeySchema"]]
    if any(key not in item for key in keys):
        return None
    projection = index["Projection"]
    if projection["ProjectionType"] == "ALL":
        return item
    held = (JOB_ID, *keys, *projection.get("NonKeyAttributes", ()))
    return {name: item[name] for name in held if name in item}


def index_writes(
    before: dict[str, Any] | None, after: dict[str, Any] | None, index: dict[str, Any]
) -> tuple[int, int]:
    """(index writes, write units) one table write makes in ``index``."""
    old, new = _entry(before, index), _entry(after, index)
    if old == new:
        return 0, 0
    units = [
        max(1, -(-(item_size(e) + INDEX_ENTRY_OVERHEAD_BYTES) // 1024))
        for e in (old, new)
        if e is not None
    ]
    keys = [k["AttributeName"] for k in index["KeySchema"]]
    if old is not None and new is not None:
        if any(old[k] != new[k] for k in keys):
            return 2, sum(units)
        return 1, units[-1]
    return 1, units[0]


@dataclass
class Tally:
    writes: int = 0
    index_writes: dict[str, int] = field(default_factory=dict)
    index_units: dict[str, int] = field(default_factory=dict)


@dataclass
class Life:
    label: str
    phases: dict[str, Tally] = field(default_factory=dict)
    ending: str = ""
    """What the life wrote last, as the item says: its state, and the index it is in."""
    ended: bool = False
    """The item reached the end of its path: finished or lost and announced, nothing due."""

    def total(self, index: str) -> tuple[int, int]:
        return (
            sum(t.index_writes.get(index, 0) for t in self.phases.values()),
            sum(t.index_units.get(index, 0) for t in self.phases.values()),
        )


@dataclass
class IndexReport:
    indexes: list[str]
    lives: list[Life]
    before: str
    """The index as it was (projecting ALL): priced on the same writes, not deployed."""
    report_key_bytes: int
    """What the report index's two attributes add to an item."""


class Watcher:
    """Counts each watched write's index writes into the current life and phase."""

    def __init__(self, reader: Any, table: str) -> None:
        self._reader = reader
        self._table = table
        # The index as it was is priced on the same writes, beside the deployed ones.
        deployed = spec.table_definition(table)["GlobalSecondaryIndexes"]
        self._indexes = []
        for index in deployed:
            self._indexes.append(index)
            if index["IndexName"] == DUE_INDEX:
                self._indexes.append(spec.DUE_INDEX_BEFORE_DEFINITION)
        self._pending = threading.local()
        self._lock = threading.Lock()
        self.life: Life | None = None
        self.phase = ""

    def _item(self, params: dict[str, Any]) -> dict[str, Any] | None:
        key = params.get("Key") or {JOB_ID: params["Item"][JOB_ID]}
        response = self._reader.get_item(TableName=self._table, Key=key, ConsistentRead=True)
        item: dict[str, Any] | None = response.get("Item")
        return item

    def before(self, model: Any, params: dict[str, Any], **_: Any) -> None:
        if model.name in WRITES and params.get("TableName") == self._table and self.life:
            # Per thread: the poller writes from its pool while its pages are read.
            self._pending.write = (params, self._item(params))

    def after(self, model: Any, **_: Any) -> None:
        pending = getattr(self._pending, "write", None)
        if model.name not in WRITES or pending is None or self.life is None:
            return
        self._pending.write = None
        params, before = pending
        after = self._item(params)
        with self._lock:
            tally = self.life.phases.setdefault(self.phase, Tally())
            tally.writes += 1
            for index in self._indexes:
                writes, units = index_writes(before, after, index)
                name = index["IndexName"]
                tally.index_writes[name] = tally.index_writes.get(name, 0) + writes
                tally.index_units[name] = tally.index_units.get(name, 0) + units

    def ending(self, job_id: str) -> tuple[str, bool]:
        """The item's ending as stored, and whether nothing more is owed on it."""
        item = self._reader.get_item(
            TableName=self._table, Key={JOB_ID: {"S": job_id}}, ConsistentRead=True
        ).get("Item", {})
        state = item.get("state", {}).get("S", "absent")
        outcome = item.get("outcome", {}).get("S")
        due = DUE_AT in item
        where = "in due-work" if due else "out of due-work"
        reported = ", in report-window" if REPORT_BUCKET in item else ""
        text = f"{state}{f' ({outcome})' if outcome else ''}, {where}{reported}"
        return text, state in ENDED and not due

    def reader_update(self, job_id: str, values: dict[str, Any]) -> None:
        """Make a registered job due now, registered at ``:at``: the bench's write, unwatched."""
        self._reader.update_item(
            TableName=self._table,
            Key={JOB_ID: {"S": job_id}},
            UpdateExpression="SET due_at = :past, registered_at = :at",
            ExpressionAttributeValues=values,
        )

    @property
    def index_names(self) -> list[str]:
        return [index["IndexName"] for index in self._indexes]

    @contextmanager
    def installed(self) -> Iterator[Watcher]:
        specs = [
            ("before-parameter-build.dynamodb.*", self.before),
            ("after-call.dynamodb.*", self.after),
        ]
        handlers.BUILTIN_HANDLERS.extend(specs)
        try:
            yield self
        finally:
            for hook in specs:
                handlers.BUILTIN_HANDLERS.remove(hook)

    @contextmanager
    def phase_of(self, phase: str) -> Iterator[None]:
        self.phase = phase
        try:
            yield
        finally:
            self.phase = ""


COMPLETED = "webhook, processed (job.completed, 2 artifacts)"


def _sqs(job_id: str) -> dict[str, Any]:
    now_ms = str(int(time.time() * 1000))
    attributes = {"ApproximateReceiveCount": "1", "SentTimestamp": now_ms}
    record = {"messageId": f"m-{job_id}", "receiptHandle": "r", "body": job_id}
    return {"Records": [{**record, "attributes": attributes, "eventSource": "aws:sqs"}]}


class _Lives:
    """Jobs' lives through the real handlers, each write counted into its life and phase.

    Its session is made while the watcher is installed, so its writes (the
    registrations, the ops CLI's replay) are watched as the handlers' are.
    """

    def __init__(self, watcher: Watcher, env: dict[str, str], shards: int) -> None:
        import boto3

        from sume.store.jobs import JobsTable
        from sume.store.queue import JobQueue

        self.watcher = watcher
        self.table = env[Env.JOBS_TABLE_NAME]
        session = boto3.session.Session()
        self.ddb = session.client("dynamodb")
        self.jobs = JobsTable(self.ddb, self.table, shards)
        self.sqs = session.client("sqs")
        self.queue = JobQueue(self.sqs, env[Env.JOBS_QUEUE_URL])
        self.shards_url = env[Env.POLL_SHARDS_QUEUE_URL]
        self.shards_arn = queue_arn(self.sqs, self.shards_url)
        self._last_round = 0
        self.lives: list[Life] = []

    def life(self, label: str) -> None:
        self.watcher.life = Life(label)
        self.lives.append(self.watcher.life)

    def deliver(self, body: bytes) -> None:
        import receiver

        with self.watcher.phase_of("receiver"), silenced():
            receiver.handler(d.delivery(body), LambdaContext())

    def work(self, job_id: str) -> None:
        import worker

        with self.watcher.phase_of("worker"), silenced():
            worker.handler(_sqs(job_id), LambdaContext())

    def expect(self, job_id: str, status_url: str, due_now: bool, registered_ago: int = 0) -> None:
        from sume.polling import registry

        with self.watcher.phase_of("registration"):
            registry.expect(job_id, status_url, table_name=self.table, dynamodb=self.ddb)
        if due_now:
            now = int(time.time())
            values = {":past": {"N": str(now - 1)}, ":at": {"N": str(now - registered_ago)}}
            self.watcher.reader_update(job_id, values)

    def poll(self) -> None:
        """One round as deployed: the tick, then each assignment it sent, one run each."""
        import poller

        with self.watcher.phase_of("poller"), silenced():
            tick, _ = rounds.play(
                poller.handler, self.sqs, self.shards_url, self.shards_arn, self._last_round
            )
        self._last_round = tick["round"]

    def end(self, job_id: str) -> None:
        """Write down how the current life ended."""
        life = self.watcher.life
        assert life is not None
        life.ending, life.ended = self.watcher.ending(job_id)

    def replay(self, job_id: str) -> None:
        from sume.core.settings import DEFAULT_SWEEP_AFTER_SECONDS
        from sume_cli.jobs import replay

        now = int(time.time())
        with self.watcher.phase_of("ops CLI"):
            replay(self.jobs, self.queue, job_id, now, DEFAULT_SWEEP_AFTER_SECONDS)


def _lives(watcher: Watcher, env: dict[str, str], shards: int) -> list[Life]:
    from devstack.simulator import Sume

    run = _Lives(watcher, env, shards)
    with Sume("http://127.0.0.1:9/unused", [d.SECRET], attempts=1) as sume:
        job = sume.new_job(artifacts=2)
        run.life(COMPLETED)
        run.deliver(job.body)
        run.work(job.job_id)
        run.end(job.job_id)
        run.life("a duplicate after it was processed (Redeliver)")
        run.deliver(job.body)
        run.end(job.job_id)
        run.life("replayed (`sume-webhooks replay`), processed again")
        run.replay(job.job_id)
        run.work(job.job_id)
        run.end(job.job_id)

        failed = sume.new_job(event="job.failed")
        run.life("webhook, processed (job.failed)")
        run.deliver(failed.body)
        run.work(failed.job_id)
        run.end(failed.job_id)

        registered = sume.new_job()
        run.life("registered, then its webhook, processed")
        run.expect(registered.job_id, registered.status_url, due_now=False)
        run.deliver(registered.body)
        run.work(registered.job_id)
        run.end(registered.job_id)

        silent = sume.new_job()
        run.life("registered, found by a status poll, processed")
        run.expect(silent.job_id, silent.status_url, due_now=True)
        run.poll()
        run.work(silent.job_id)
        run.end(silent.job_id)

        never = sume.new_job()
        run.life("registered, never found: lost, announced")
        # The status URL of a job Sume does not know: the poll fails and,
        # past the cut-off, the poller's run gives the job up and announces
        # it itself: no message, no worker.
        unknown = never.status_url.replace(never.job_id, "job_unknown")
        run.expect(never.job_id, unknown, due_now=True, registered_ago=10**7)
        run.poll()
        run.end(never.job_id)
    watcher.life = None
    return run.lives


def measure(shards: int = DUE_SHARDS) -> IndexReport:
    """Each life on a fresh moto account; ``shards`` as ``jobpaths.measure``'s."""
    import boto3
    from moto import mock_aws

    from devstack.resources import create_resources
    from devstack.resources import environment as lambda_env

    with mock_aws():
        session = boto3.session.Session()
        names = create_resources(session, prefix="sume-bench", signing_secret=d.SECRET)
        env = lambda_env(names)
        watcher = Watcher(session.client("dynamodb"), names.table)
        local = {
            Env.ALLOW_HTTP_URLS: "true",
            Env.ALLOW_PRIVATE_HOSTS: "true",
            Env.DUE_SHARDS: str(shards),
        }
        runtime.reset()
        with environment({**env, **local}), watcher.installed():
            lives = _lives(watcher, env, shards)
        runtime.reset()
    keys = {"report_bucket": {"S": "2026-12-01#07"}, "report_at": {"N": "1764590000"}}
    return IndexReport(watcher.index_names, lives, DUE_INDEX_BEFORE, item_size(keys))


def completed_due_units(report: IndexReport) -> int:
    """The due-work index's write units for a job completed by webhook with 2 artifacts."""
    life = next(life for life in report.lives if life.label == COMPLETED)
    return life.total(DUE_INDEX)[1]


def report_index_writes_by_receiver(report: IndexReport) -> int:
    return sum(
        life.phases["receiver"].index_writes.get(REPORT_INDEX, 0)
        for life in report.lives
        if "receiver" in life.phases
    )


def render(report: IndexReport, targets: Targets) -> None:
    print(
        "## 8. Index writes per job (the real handlers on moto in-process; every write's "
        "item read before and after, each index's entry compared)\n"
    )
    rows = []
    for life in report.lives:
        cells: list[object] = [life.label, sum(t.writes for t in life.phases.values())]
        for index in report.indexes:
            writes, units = life.total(index)
            cells.append(f"{writes} ({units} WRU)")
        by = ", ".join(
            f"{phase} {tally.index_units.get(REPORT_INDEX, 0)}"
            for phase, tally in life.phases.items()
        )
        rows.append((*cells, by, life.ending))
    headers = ["job's life", "table writes"]
    headers += [
        f"`{index}` writes (WRU)"
        + (" as it was (ALL), not deployed" if index == report.before else "")
        for index in report.indexes
    ]
    headers += [f"`{REPORT_INDEX}` WRU by writer", "ending written"]
    print(table(headers, rows))
    due_units = completed_due_units(report)
    targets.add(
        f"`{DUE_INDEX}`: at most 3 write units for a job completed with 2 artifacts",
        str(due_units),
        due_units <= 3,
    )
    unended = [life.label for life in report.lives if not life.ended]
    targets.add(
        "every index scenario runs to its ending",
        f"{len(report.lives) - len(unended)} of {len(report.lives)}",
        not unended,
    )
    per_job = max(life.total(REPORT_INDEX)[1] for life in report.lives)
    by_receiver = report_index_writes_by_receiver(report)
    usd = per_job * cost.DDB_WRU_PER_M
    print(
        f"\nThe report index's keys add {report.report_key_bytes} B to the item. At most "
        f"{per_job} write unit per job goes to `{REPORT_INDEX}` (${usd:.3f} "
        "per million jobs at on-demand prices), from the write that ends it; "
        f"the receiver's writes make {by_receiver} of them.\n"
    )
    targets.add(
        f"receiver: 0 writes of the `{REPORT_INDEX}` index",
        str(by_receiver),
        by_receiver == 0,
    )
    targets.add(f"`{REPORT_INDEX}`: at most 1 write unit per job", str(per_job), per_job <= 1)
