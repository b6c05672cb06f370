"""The resources' shape, shared by the CDK stack and the local stack.

Plain Python (no CDK import), so ``devstack`` can create the same table,
index and queues on moto that ``infra`` deploys, and they cannot drift.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from sume.core.names import (
    DUE_AT,
    DUE_INDEX,
    DUE_INDEX_BEFORE,
    DUE_PROJECTED,
    DUE_SHARD,
    EVENT_SOURCE,
    JOB_ID,
    REGISTRATION_DETAIL_TYPE,
    REPORT_AT,
    REPORT_BUCKET,
    REPORT_INDEX,
    TTL_ATTRIBUTE,
    Env,
)

# Lambda timeouts (seconds). The receiver answers well inside Sume's 10 s.
RECEIVER_TIMEOUT: Final = 8
POLLER_TIMEOUT: Final = 120

# Lambda memory (MB), which also sets each function's CPU share; the bench
# prices the receiver at its figure.
RECEIVER_MEMORY_MB: Final = 512
POLLER_MEMORY_MB: Final = 512

# The receiver runs from a SnapStart snapshot of its init (docs/bench.md, "SnapStart"):
# its imports are most of its cold start and no Sume delivery should wait for
# them. API Gateway invokes this alias of its latest published version.
RECEIVER_SNAPSTART: Final = True
RECEIVER_ALIAS: Final = "live"

# The poller's schedule unless a stage sets poll_rate_minutes; the bench
# sizes the poller's capacity against it.
DEFAULT_POLL_RATE_MINUTES: Final = 5

# The worker's timeout and memory and the largest artifact are chosen together
# (docs/worker.md, "Time, size and memory", says how to change them); the
# other terms are the worker's settings (sume/working/settings.py):
#
#   T = HTTP_TOTAL_TIMEOUT_SECONDS  270 s  the longest one artifact's copy may take
#   M = TIME_BUDGET_MARGIN_SECONDS   20 s  after it: the uploads still in flight,
#                                          the announcement and the finish
#   C = the claim, reading the event 10 s  before it (tests/infra/test_worker_budget.py)
#   WORKER_TIMEOUT >= C + T + M = 300 s    (LEASE_SECONDS, 900, stays above it)
#
#   R = ARTIFACT_PLANNED_BYTES_PER_SECOND, 20 MB/s: the slowest copy planned
#       for, one stream from an origin that offers no ranges and caps each
#       connection at 25 MB/s (`make bench` measures ours at 22 MB/s there, and
#       ranged copies at several times that). A copy whose declared size does
#       not fit the time left at R is not started; a fresh invocation gives T.
#   MAX_ARTIFACT_BYTES <= R x T = 5.4 GB. It is 5 GiB (5.37 GB), so no artifact
#       under the cap is ever refused as too_large_for_invocation.
#
#   Memory: a copy holds (ARTIFACT_CONNECTIONS + ARTIFACT_UPLOADS) parts of
#   ARTIFACT_PART_BYTES, 8 x 8 MiB, and about 2 MiB of botocore's per upload:
#   72 MiB over a runtime of about 80 MB. The 1024 MB are for the CPU share,
#   0.58 of a vCPU: a copy costs 5 to 7 CPU s per GB (`make bench`, section
#   6), so the worker carries 85 to 115 MB/s, four to five times R.
WORKER_TIMEOUT: Final = 300
WORKER_MEMORY_MB: Final = 1024

# SQS: the queue's visibility timeout must cover the worker's whole batch
# (AWS advises at least 6x the function timeout); after MAX_RECEIVES failed
# attempts a message goes to the DLQ. The worker is told all three
# (worker_queue_environment): its attempt budget defaults to MAX_RECEIVES, it
# parks a job on the last receive, and it times the sweeper around the retry.
QUEUE_VISIBILITY_TIMEOUT: Final = 6 * WORKER_TIMEOUT
MAX_RECEIVES: Final = 5
DLQ_RETENTION_SECONDS: Final = 14 * 24 * 3600


def worker_queue_environment() -> dict[str, str]:
    """What the worker must know of the jobs queue and its DLQ (docs/worker.md)."""
    return {
        Env.MAX_RECEIVES: str(MAX_RECEIVES),
        Env.QUEUE_RETRY_SECONDS: str(QUEUE_VISIBILITY_TIMEOUT),
        Env.DLQ_RETENTION_SECONDS: str(DLQ_RETENTION_SECONDS),
    }


TTL: Final = TTL_ATTRIBUTE

# Registration events: a rule on the bus sends them to the registrations queue,
# whose event source hands them to the poller (same visibility rule as the
# jobs queue); after MAX_RECEIVES failed attempts a message goes to its DLQ.
REGISTRATION_PATTERN: Final = {"detail-type": [REGISTRATION_DETAIL_TYPE]}
# The project's own events, every announcement: what subscribers match and the
# bus's archive keeps (registration events are the applications', not ours).
ANNOUNCEMENTS_PATTERN: Final = {"source": [EVENT_SOURCE]}
REGISTRATIONS_VISIBILITY_TIMEOUT: Final = 6 * POLLER_TIMEOUT

# The poller's fan-out (sume.polling.fanout): the tick's assignments wait in
# the shards queue; a failed run is retried once its invocation is surely
# over (Lambda needs the visibility timeout to cover the function's timeout),
# while its round's unclaimed shards are still worth working. An assignment
# older than one round is worth nothing (its shards are the next round's), so
# none is kept longer: SQS's minimum retention, or the schedule's period.
SHARDS_VISIBILITY_TIMEOUT: Final = POLLER_TIMEOUT
SHARDS_MIN_RETENTION_SECONDS: Final = 60


def shards_retention_seconds(poll_rate_minutes: int) -> int:
    return max(SHARDS_MIN_RETENTION_SECONDS, poll_rate_minutes * 60)


def leases_table_definition(table_name: str) -> dict[str, Any]:
    """``CreateTable`` arguments matching the stack's shard leases table (for moto)."""
    return {
        "TableName": table_name,
        "BillingMode": "PAY_PER_REQUEST",
        "KeySchema": [{"AttributeName": DUE_SHARD, "KeyType": "HASH"}],
        "AttributeDefinitions": [{"AttributeName": DUE_SHARD, "AttributeType": "N"}],
    }


# The JSON Schemas of the events on the bus (built by infra.schemas.files),
# registered in the stack's schema registry as they are.
SCHEMAS_DIR: Final = Path(__file__).resolve().parent.parent / "schemas"


DUE_KEYS: Final = [
    {"AttributeName": DUE_SHARD, "KeyType": "HASH"},
    {"AttributeName": DUE_AT, "KeyType": "RANGE"},
]
# The due-work index as it was (projecting ALL), which a live table keeps while it
# migrates to DUE_INDEX (docs/operations.md, "Changing an index's projection").
DUE_INDEX_BEFORE_DEFINITION: Final = {
    "IndexName": DUE_INDEX_BEFORE,
    "KeySchema": DUE_KEYS,
    "Projection": {"ProjectionType": "ALL"},
}


def table_definition(table_name: str, due_index_before: bool = False) -> dict[str, Any]:
    """``CreateTable`` arguments matching the stack's table (for moto).

    ``due_index_before``: the due-work index as it was is kept beside the new one,
    as while a live table migrates (``due_index_migration``).
    """
    definition: dict[str, Any] = {
        "TableName": table_name,
        "BillingMode": "PAY_PER_REQUEST",
        "KeySchema": [{"AttributeName": JOB_ID, "KeyType": "HASH"}],
        "AttributeDefinitions": [
            {"AttributeName": JOB_ID, "AttributeType": "S"},
            {"AttributeName": DUE_SHARD, "AttributeType": "N"},
            {"AttributeName": DUE_AT, "AttributeType": "N"},
            {"AttributeName": REPORT_BUCKET, "AttributeType": "S"},
            {"AttributeName": REPORT_AT, "AttributeType": "N"},
        ],
        "GlobalSecondaryIndexes": [
            {
                "IndexName": DUE_INDEX,
                "KeySchema": copy.deepcopy(DUE_KEYS),
                "Projection": {
                    "ProjectionType": "INCLUDE",
                    "NonKeyAttributes": list(DUE_PROJECTED),
                },
            },
            {
                # Keys only: a write that changes no key of it (the receiver's,
                # the worker's claim) never writes it (docs/cli.md, "report").
                "IndexName": REPORT_INDEX,
                "KeySchema": [
                    {"AttributeName": REPORT_BUCKET, "KeyType": "HASH"},
                    {"AttributeName": REPORT_AT, "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "KEYS_ONLY"},
            },
        ],
    }
    if due_index_before:
        definition["GlobalSecondaryIndexes"].append(copy.deepcopy(DUE_INDEX_BEFORE_DEFINITION))
    return definition


def stack_name(stage: str) -> str:
    return f"SumeWebhooks-{stage}"


def global_table_name(stage: str) -> str:
    """The MRSC jobs table's name, the same in every region of the stage."""
    return f"{stack_name(stage)}-jobs"


# CloudFormation output keys: the ops CLI finds a deployed stage's resources
# through these, so they are part of the stack's interface.
OUTPUT_WEBHOOK_URL: Final = "WebhookUrl"
# Multi-region deployments only (infra/regions.py).
OUTPUT_REGION_WEBHOOK_URL: Final = "RegionWebhookUrl"
OUTPUT_HEALTH_CHECK: Final = "HealthCheckId"
# The local stack has no CloudFormation: what the ops CLI reads from a stage's
# outputs and its poller's environment, it reads from these tags of its jobs queue.
LOCAL_TAG_WEBHOOK_URL: Final = OUTPUT_WEBHOOK_URL
LOCAL_TAG_DUE_SHARDS: Final = "DueShards"
LOCAL_TAG_DUE_SHARDS_PREVIOUS: Final = "DueShardsPrevious"
OUTPUTS: Final = {
    "table": "JobsTableName",
    "queue_url": "JobsQueueUrl",
    "dlq_url": "JobsDlqUrl",
    "artifacts_bucket": "ArtifactsBucketName",
    "payloads_bucket": "PayloadsBucketName",
    "event_bus": "EventBusName",
    "signing_secret_arn": "SigningSecretArn",
    "api_token_secret_arn": "SumeApiTokenSecretArn",
    "registrations_queue_url": "RegistrationQueueUrl",
    "registrations_dlq_url": "RegistrationDlqUrl",
    "shards_queue_url": "PollShardsQueueUrl",
    "leases_table": "ShardLeasesTableName",
    "announcements_archive": "AnnouncementsArchiveName",
}


@dataclass(frozen=True)
class ResourceNames:
    """Physical names of one deployment's resources (stack outputs, or local)."""

    table: str
    queue_url: str
    dlq_url: str
    artifacts_bucket: str
    payloads_bucket: str
    event_bus: str
    signing_secret_arn: str | None = None
    api_token_secret_arn: str | None = None
    registrations_queue_url: str = ""
    registrations_dlq_url: str = ""
    shards_queue_url: str = ""
    leases_table: str = ""
    announcements_archive: str = ""


# How long the local stack's archive keeps announcements (the stage's default is
# retention_days, as long as a job's item and so its dedupe last).
LOCAL_ARCHIVE_DAYS: Final = 35


def local_archive(prefix: str) -> str:
    """The local stack's archive of announcements (a stage's is in its outputs)."""
    return f"{prefix}-announcements"


# The local stack's timings: seconds instead of minutes, so a crash, a lost
# webhook or a retry recovers while you watch. Any of them can be overridden
# from the environment. Here because the ops CLI must know them too (expect's
# first poll), and the CLI ships while the local stack does not.
LOCAL_TIMINGS: Final = {
    Env.REDELIVER_GRACE_SECONDS: "2",
    Env.SWEEP_AFTER_SECONDS: "10",
    Env.LEASE_SECONDS: "30",
    Env.POLL_INITIAL_SECONDS: "2",
    Env.POLL_MAX_INTERVAL_SECONDS: "10",
    Env.MAX_POLL_AGE_SECONDS: "600",
    Env.SECRET_CACHE_SECONDS: "5",
}

# Only the local stack may fetch plain http from loopback: the simulator serves
# artifacts and status answers from 127.0.0.1, its Sume API (`status_allowed_hosts`
# in a deployment). Here because the ops CLI registers jobs by its rule too.
LOCAL_HOST: Final = "127.0.0.1"
LOCAL_URLS: Final = {
    Env.ALLOW_HTTP_URLS: "true",
    Env.ALLOW_PRIVATE_HOSTS: "true",
    Env.STATUS_ALLOWED_HOSTS: LOCAL_HOST,
}

# Outputs for people rather than the ops CLI: where alarms go, what to open.
OUTPUT_ALARM_TOPIC: Final = "AlarmTopicArn"
OUTPUT_DASHBOARD: Final = "DashboardName"
# What the stage takes (infra/capacity.py): Sume jobs a second at the worst case,
# and the quota (or limit) that binds first past it.
OUTPUT_CAPACITY: Final = "CapacityJobsPerSecond"
OUTPUT_CAPACITY_BOUND_BY: Final = "CapacityBoundBy"

# Outputs for applications that register jobs by event (what to put, and the
# managed policy that lets them put it) or read the events' schemas.
OUTPUT_REGISTRATION_DETAIL_TYPE: Final = "RegistrationDetailType"
OUTPUT_REGISTRATION_POLICY: Final = "RegistrationPolicyArn"
OUTPUT_SCHEMA_REGISTRY: Final = "SchemaRegistryName"
