"""Names shared by the code, the CDK stack and the local stack.

The table layout, the due-work index, the announcement API and the functions'
environment variables are facts that the three functions, ``infra/`` and the
tools must agree on, so they live
in one place and every side imports them instead of repeating strings.
"""

from __future__ import annotations

import enum
import hashlib
import time
from typing import Final

WEBHOOK_PATH: Final = "/webhooks/sume"
# Unauthenticated: answers whether this region's receiver can reach its table
# (Route 53's health checks ask it; docs/operations.md, "Two regions").
HEALTH_PATH: Final = "/health"
# Its 200 names the region that answered: behind the failover domain, the one serving.
HEALTH_REGION: Final = "region"

# Jobs table: one item per job, partition key only.
JOB_ID: Final = "job_id"
TTL_ATTRIBUTE: Final = "expires_at"

# Sparse GSI of items that need attention at some time: awaiting jobs (next
# status poll) and jobs whose follow-up work is owed (sweep deadline). Items
# without these two attributes are not in the index at all.
# The index's name is part of its identity: DynamoDB cannot change what an index
# projects, so a new projection comes under a new name (docs/operations.md,
# "Changing an index's projection"). ``due-work`` projected ALL until then.
DUE_INDEX: Final = "due-work-v2"
DUE_INDEX_BEFORE: Final = "due-work"
DUE_SHARD: Final = "due_shard"
DUE_AT: Final = "due_at"
# What the due-work index holds besides its keys and job_id: what its readers read
# (the poller's polls and sweeps, the awaiting gauge, the CLI's list and report),
# never the body, the metadata or the artifacts. An index entry is written only when
# one of these, or a key, changes: a progress write or a duplicate delivery writes
# none, a claim one (its state and lease; the due time stays). DynamoDB allows 20.
DUE_PROJECTED: Final = (
    "state",
    "source",
    "event",
    "status",
    "outcome",
    "processing_error",
    "first_seen",
    "received_at",
    "claimed_at",
    "lease_until",
    "parked_at",
    "sweeps",
    "replays",
    "processed_at",
    "status_url",
    "registered_at",
    "poll_attempts",
    "lost_at",
    "report_bucket",
)
DUE_SHARDS: Final = 16
# A round runs at most one poller per shard, within one SQS event source's cap (1000).
MAX_DUE_SHARDS: Final = 1000

# Sparse GSI of ended jobs by when they entered the completeness report's window
# (``sume-webhooks report``, docs/cli.md): partition ``report_bucket``, the UTC day
# of ``report_at`` and the job's report shard (``report_shard``), so a day's writes
# spread over REPORT_SHARDS partitions; sort ``report_at``; keys only, so
# no later write of the item but one changing these keys writes the index. Only
# the writes that end a job (the worker's finish, the poller's lost) set them.
REPORT_INDEX: Final = "report-window"
REPORT_BUCKET: Final = "report_bucket"
REPORT_AT: Final = "report_at"
# The report index's shards: fixed, not DUE_SHARDS, so a job stays in a bucket the
# report reads whatever the due-work shard count was when it ended. Items written
# while the report shard was the due shard have a bucket below the count in force
# then: the report reads max(REPORT_SHARDS, DUE_SHARDS) (docs/cli.md).
REPORT_SHARDS: Final = 16

# EventBridge announcements (a public API, documented in docs/announcements.md).
EVENT_SOURCE: Final = "sume.webhooks"
DETAIL_TYPES: Final = {
    "completed": "Sume Job Completed",
    "failed": "Sume Job Failed",
    "canceled": "Sume Job Canceled",
    "processing_error": "Sume Job Processing Error",
    "lost": "Sume Job Lost",
}
# Put by the poller when an application's registration event is refused for good.
REGISTRATION_REFUSED_DETAIL_TYPE: Final = "Sume Job Registration Refused"
# What an application puts on the same bus to register a job it submitted
# (sume.polling.registration); its source is the application's own.
REGISTRATION_DETAIL_TYPE: Final = "Sume Job Submitted"

# The key of the expiry schedule's event to the poller (two regions: the MRSC
# table has no TTL), ``{"expire_ended_jobs": true}``.
EXPIRY_EVENT: Final = "expire_ended_jobs"

METRICS_NAMESPACE: Final = "SumeWebhooks"
SERVICE_NAME: Final = "sume-webhooks"

# The key that marks a log line as one job event (``job_event=Happened.X`` in the
# logger's call), and the events it names: each is one line of one function's
# log, at INFO or above, which ``sume-webhooks tail`` follows (docs/cli.md).
JOB_EVENT: Final = "job_event"


class Happened(enum.StrEnum):
    RECEIVED = "received"
    DUPLICATE = "duplicate"
    CONFLICT = "conflict"
    REJECTED = "rejected"
    RETRY = "retry"
    SWEEPER = "sweeper"
    DLQ = "dlq"
    PROCESSED = "processed"
    REPLAYED = "replayed"
    PROCESSING_ERROR = "processing_error"
    RECOVERED = "recovered"
    LOST = "lost"
    REGISTERED = "registered"
    REFUSED = "refused"


class Env:
    """The functions' environment variables: ``sume.core.settings`` reads them,
    ``infra/`` and the local stack set them."""

    # The stack's resources.
    JOBS_TABLE_NAME: Final = "JOBS_TABLE_NAME"
    JOBS_QUEUE_URL: Final = "JOBS_QUEUE_URL"
    PAYLOADS_BUCKET_NAME: Final = "PAYLOADS_BUCKET_NAME"
    ARTIFACTS_BUCKET_NAME: Final = "ARTIFACTS_BUCKET_NAME"
    # Two regions only: the other region, and its payloads bucket (large events
    # are written to both).
    PEER_REGION: Final = "PEER_REGION"
    PEER_PAYLOADS_BUCKET_NAME: Final = "PEER_PAYLOADS_BUCKET_NAME"
    EVENT_BUS_NAME: Final = "EVENT_BUS_NAME"
    SIGNING_SECRET_ARN: Final = "SIGNING_SECRET_ARN"
    SUME_API_TOKEN_ARN: Final = "SUME_API_TOKEN_ARN"
    REGISTRATION_DLQ_URL: Final = "REGISTRATION_DLQ_URL"
    DUE_SHARDS: Final = "DUE_SHARDS"
    DUE_SHARDS_PREVIOUS: Final = "DUE_SHARDS_PREVIOUS"
    DUE_INDEX_NAME: Final = "DUE_INDEX_NAME"
    POLL_SHARDS_QUEUE_URL: Final = "POLL_SHARDS_QUEUE_URL"
    SHARD_LEASES_TABLE_NAME: Final = "SHARD_LEASES_TABLE_NAME"
    POLL_SHARDS_PER_RUN: Final = "POLL_SHARDS_PER_RUN"
    # The poller's sweep holds owed work while this mapping (the worker's) is off.
    WORKER_EVENT_SOURCE_MAPPING: Final = "WORKER_EVENT_SOURCE_MAPPING"
    # Two regions only: the failover domain's health route, and Route 53's primary.
    FAILOVER_HEALTH_URL: Final = "FAILOVER_HEALTH_URL"
    FAILOVER_PRIMARY_REGION: Final = "FAILOVER_PRIMARY_REGION"
    POLL_ROUND_SECONDS: Final = "POLL_ROUND_SECONDS"
    EXPIRY_LOOKBACK_DAYS: Final = "EXPIRY_LOOKBACK_DAYS"

    # Secrets in plain text, for running without Secrets Manager.
    SUME_COM_WEBHOOK_SIGNING_SECRET: Final = "SUME_COM_WEBHOOK_SIGNING_SECRET"
    SUME_API_TOKEN: Final = "SUME_API_TOKEN"

    # Which URLs the worker and the poller may fetch.
    ALLOW_HTTP_URLS: Final = "ALLOW_HTTP_URLS"
    ALLOW_PRIVATE_HOSTS: Final = "ALLOW_PRIVATE_HOSTS"
    ARTIFACT_ALLOWED_HOSTS: Final = "ARTIFACT_ALLOWED_HOSTS"
    STATUS_ALLOWED_HOSTS: Final = "STATUS_ALLOWED_HOSTS"

    # Limits and timings.
    SECRET_CACHE_SECONDS: Final = "SECRET_CACHE_SECONDS"
    SIGNATURE_TOLERANCE_SECONDS: Final = "SIGNATURE_TOLERANCE_SECONDS"
    MAX_BODY_BYTES: Final = "MAX_BODY_BYTES"
    REDELIVER_GRACE_SECONDS: Final = "REDELIVER_GRACE_SECONDS"
    SWEEP_AFTER_SECONDS: Final = "SWEEP_AFTER_SECONDS"
    MAX_ARTIFACT_BYTES: Final = "MAX_ARTIFACT_BYTES"
    ARTIFACT_PART_BYTES: Final = "ARTIFACT_PART_BYTES"
    ARTIFACT_CONNECTIONS: Final = "ARTIFACT_CONNECTIONS"
    ARTIFACT_UPLOADS: Final = "ARTIFACT_UPLOADS"
    ARTIFACT_PLANNED_BYTES_PER_SECOND: Final = "ARTIFACT_PLANNED_BYTES_PER_SECOND"
    RETENTION_DAYS: Final = "RETENTION_DAYS"
    LEASE_SECONDS: Final = "LEASE_SECONDS"
    MAX_ATTEMPTS: Final = "MAX_ATTEMPTS"
    MAX_RECEIVES: Final = "MAX_RECEIVES"
    QUEUE_RETRY_SECONDS: Final = "QUEUE_RETRY_SECONDS"
    DLQ_RETENTION_SECONDS: Final = "DLQ_RETENTION_SECONDS"
    HTTP_CONNECT_TIMEOUT_SECONDS: Final = "HTTP_CONNECT_TIMEOUT_SECONDS"
    HTTP_READ_TIMEOUT_SECONDS: Final = "HTTP_READ_TIMEOUT_SECONDS"
    HTTP_TOTAL_TIMEOUT_SECONDS: Final = "HTTP_TOTAL_TIMEOUT_SECONDS"
    TIME_BUDGET_MARGIN_SECONDS: Final = "TIME_BUDGET_MARGIN_SECONDS"
    POLL_INITIAL_SECONDS: Final = "POLL_INITIAL_SECONDS"
    POLL_MAX_INTERVAL_SECONDS: Final = "POLL_MAX_INTERVAL_SECONDS"
    MAX_POLL_AGE_SECONDS: Final = "MAX_POLL_AGE_SECONDS"
    MAX_PARALLEL_POLLS: Final = "MAX_PARALLEL_POLLS"


class Metric:
    """The functions' CloudWatch metrics (``METRICS_NAMESPACE``, dimension
    ``service``): emitted by the handlers, alarmed and graphed by
    ``infra/monitoring.py``, read by the operator's CLI."""

    # receiver
    DELIVERIES: Final = "Deliveries"
    # Signed by Sume and accepted, whatever the result (the silence alarm's).
    VERIFIED_DELIVERIES: Final = "VerifiedDeliveries"
    NEW_JOBS: Final = "NewJobs"
    DUPLICATES: Final = "Duplicates"
    CONFLICTS: Final = "Conflicts"
    TEST_PINGS: Final = "TestPings"
    UNKNOWN_EVENTS: Final = "UnknownEvents"
    REENQUEUED: Final = "Reenqueued"
    REJECTIONS: Final = "Rejections"
    SIGNATURE_REJECTIONS: Final = "SignatureRejections"
    STORAGE_ERRORS: Final = "StorageErrors"
    CONFIGURATION_ERRORS: Final = "ConfigurationErrors"
    HEALTH_CHECK_FAILURES: Final = "HealthCheckFailures"
    # receiver and poller, two regions: a large event the other region's bucket did not take.
    PAYLOADS_IN_ONE_REGION: Final = "PayloadsInOneRegion"
    # worker
    JOBS_SKIPPED: Final = "JobsSkipped"
    LOST_JOBS_ANNOUNCED: Final = "LostJobsAnnounced"
    JOBS_PROCESSED: Final = "JobsProcessed"
    JOBS_COMPLETED: Final = "JobsCompleted"
    JOBS_FAILED: Final = "JobsFailed"
    JOBS_CANCELED: Final = "JobsCanceled"
    PROCESSING_ERRORS: Final = "ProcessingErrors"
    ARTIFACT_BYTES: Final = "ArtifactBytes"
    INVALID_MESSAGES: Final = "InvalidMessages"
    WORKER_RETRIES: Final = "WorkerRetries"
    WORKER_FAILURES: Final = "WorkerFailures"
    # poller
    POLLER_ERRORS: Final = "PollerErrors"
    JOBS_POLLED: Final = "JobsPolled"
    JOBS_RECOVERED_BY_POLL: Final = "JobsRecoveredByPoll"
    JOBS_LOST: Final = "JobsLost"
    SWEPT_JOBS: Final = "SweptJobs"
    POLLER_STEP_ERRORS: Final = "PollerStepErrors"
    STATUS_URL_REFUSED: Final = "StatusUrlRefused"
    STATUS_ANSWERS_FOR_OTHER_JOBS: Final = "StatusAnswersForOtherJobs"
    POLLER_CONFIGURATION_ERRORS: Final = "PollerConfigurationErrors"
    POLLER_BACKLOG: Final = "PollerBacklog"
    # Gauge: registered jobs still awaiting their terminal event (the silence alarm's).
    JOBS_AWAITING: Final = "JobsAwaiting"
    POLLER_RUNS_STARTED: Final = "PollerRunsStarted"
    # Gauge, two regions only: 1 when the failover domain answers from this region.
    SERVING: Final = "Serving"
    # poller, two regions: ended jobs deleted past their retention (no TTL on MRSC).
    JOBS_EXPIRED: Final = "JobsExpired"
    # poller, registrations by event
    JOBS_REGISTERED: Final = "JobsRegistered"
    REGISTRATIONS_OF_KNOWN_JOBS: Final = "RegistrationsOfKnownJobs"
    REGISTRATIONS_REJECTED: Final = "RegistrationsRejected"
    REGISTRATION_RETRIES: Final = "RegistrationRetries"

    @staticmethod
    def signature_secret(position: int) -> str:
        """Deliveries verified by the secret at ``position`` of the list (0: newest).

        Ops retire an old secret once its position stops matching.
        """
        return f"SignatureSecret{position}"

    @staticmethod
    def rejected(reason: str) -> str:
        """Deliveries refused for ``reason`` (the error code the receiver answered)."""
        return f"Rejected_{reason}"


def due_shard(job_id: str, shards: int = DUE_SHARDS) -> int:
    """Stable shard for a job, so one job always lands in the same partition.

    A hash rather than ``hash()``: Python salts ``hash`` per process, and the
    receiver, worker and poller run in different processes.
    """
    digest = hashlib.blake2b(job_id.encode("utf-8"), digest_size=4).digest()
    return int.from_bytes(digest, "big") % shards


def report_bucket(at: int, job_id: str) -> str:
    """The report index's partition of a job that entered the window at ``at`` (epoch s)."""
    return _bucket(at, due_shard(job_id, REPORT_SHARDS))


def _bucket(at: int, shard: int) -> str:
    return f"{time.strftime('%Y-%m-%d', time.gmtime(at))}#{shard:02d}"


def report_buckets(since: int, until: int, shards: int = REPORT_SHARDS) -> list[str]:
    """Every partition of the report index that holds jobs entered in ``[since, until]``."""
    first, last = since - since % 86400, until - until % 86400
    return [_bucket(day, shard) for day in range(first, last + 1, 86400) for shard in range(shards)]
