"""Whether this region's receiver can take a delivery: its table answers.

Route 53's health checks ask ``GET /health`` in every region of a
multi-region deployment and send Sume's deliveries only to regions that
answer 200 (docs/operations.md, "Two regions"). API Gateway answering is
not enough: the outage this guards against is the table's endpoint failing
while everything in front of it still runs. The probe is one strongly
consistent read, which on a multi-region strongly consistent table also
proves the region can reach the others, as a delivery's conditional write
must. It touches nothing a delivery uses, so the webhook's hot path keeps its
calls, and it says nothing of why it failed.
"""

from __future__ import annotations

from typing import Any, Final

from sume.core.names import JOB_ID

# Whether an item exists under it does not matter: only that the table answers.
# One read unit either way (only the key is projected, under 4 KB).
PROBE_KEY: Final = "health-probe"


class TableProbe:
    def __init__(self, dynamodb: Any, table_name: str) -> None:
        self._dynamodb = dynamodb
        self._table = table_name

    def check(self) -> None:
        """Returns when the table answered; raises what the client raised otherwise."""
        self._dynamodb.get_item(
            TableName=self._table,
            Key={JOB_ID: {"S": PROBE_KEY}},
            ConsistentRead=True,
            ProjectionExpression=JOB_ID,
        )
