"""Names shared by the code, the CDK stack and the local stack.

The table layout, the due-work index and the announcement API are facts that
the three functions, ``infra/`` and the tools must agree on, so they live
in one place and every side imports them instead of repeating strings.
"""

from __future__ import annotations

import hashlib
from typing import Final

WEBHOOK_PATH: Final = "/webhooks/sume"
WEBHOOK_ROUTE_KEY: Final = f"POST {WEBHOOK_PATH}"

# Jobs table: one item per job, partition key only.
JOB_ID: Final = "job_id"
TTL_ATTRIBUTE: Final = "expires_at"

# Sparse GSI of items that need attention at some time: awaiting jobs (next
# status poll) and jobs whose follow-up work is owed (sweep deadline). Items
# without these two attributes are not in the index at all.
DUE_INDEX: Final = "due-work"
DUE_SHARD: Final = "due_shard"
DUE_AT: Final = "due_at"
DUE_SHARDS: Final = 16

# EventBridge announcements (a public API, documented in docs/announcements.md).
EVENT_SOURCE: Final = "sume.webhooks"
DETAIL_TYPES: Final = {
    "completed": "Sume Job Completed",
    "failed": "Sume Job Failed",
    "canceled": "Sume Job Canceled",
    "processing_error": "Sume Job Processing Error",
}
# What an application puts on the same bus to register a job it submitted
# (sume.registration); its source is the application's own.
REGISTRATION_DETAIL_TYPE: Final = "Sume Job Submitted"

METRICS_NAMESPACE: Final = "SumeWebhooks"
SERVICE_NAME: Final = "sume-webhooks"


def due_shard(job_id: str, shards: int = DUE_SHARDS) -> int:
    """Stable shard for a job, so one job always lands in the same partition.

    A hash rather than ``hash()``: Python salts ``hash`` per process, and the
    receiver, worker and poller run in different processes.
    """
    digest = hashlib.blake2b(job_id.encode("utf-8"), digest_size=4).digest()
    return int.from_bytes(digest, "big") % shards
