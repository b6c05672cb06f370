"""The job store wired from settings: the jobs table and the intake both handlers share."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Protocol

from sume.core import aws
from sume.core.aws import Clients
from sume.core.names import DUE_INDEX, DUE_SHARDS
from sume.core.settings import PeerPayloads, TableSettings
from sume.store.intake import JobIntake
from sume.store.jobs import JobsTable
from sume.store.payloads import PayloadStore, PeerBucket
from sume.store.queue import JobQueue


class IntakeSettings(Protocol):
    """What recording a terminal event needs (the receiver's and the poller's settings)."""

    @property
    def table(self) -> TableSettings: ...
    @property
    def payloads_bucket_name(self) -> str | None: ...
    @property
    def redeliver_grace_seconds(self) -> int: ...
    @property
    def sweep_after_seconds(self) -> int: ...
    @property
    def peer_payloads(self) -> PeerPayloads | None: ...


class JobsTableSettings(Protocol):
    """Which jobs table, and how many shards its due-work index has."""

    @property
    def jobs_table_name(self) -> str: ...
    @property
    def due_shards(self) -> int: ...
    @property
    def due_index(self) -> str: ...


@dataclass(frozen=True)
class TableRef:
    """A jobs table by name alone, for the tools that find it in a deployment's outputs."""

    jobs_table_name: str
    due_shards: int = DUE_SHARDS
    due_index: str = DUE_INDEX


def build_jobs(table: JobsTableSettings, dynamodb: Any) -> JobsTable:
    """The jobs table, for every handler, the CLI and the local stack alike."""
    return JobsTable(dynamodb, table.jobs_table_name, table.due_shards, table.due_index)


def build_intake(settings: IntakeSettings, clients: Clients = aws.client) -> JobIntake:
    """Recording a terminal event, as the receiver and the poller both do."""
    table, bucket = settings.table, settings.payloads_bucket_name
    return JobIntake(
        build_jobs(table, clients("dynamodb")),
        JobQueue(clients("sqs"), table.jobs_queue_url),
        PayloadStore(functools.partial(clients, "s3"), bucket, _peer(settings.peer_payloads))
        if bucket
        else None,
        settings.redeliver_grace_seconds,
        settings.sweep_after_seconds,
    )


def _peer(peer: PeerPayloads | None) -> PeerBucket | None:
    """The other region's payloads bucket, through a client of that region."""
    if peer is None:
        return None
    return PeerBucket(functools.partial(aws.regional_client, "s3", peer.region), peer.bucket)
