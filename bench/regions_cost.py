"""What a region's outage no longer holds back costs (two regions): a large event's
second copy, and the MRSC table's expiry, per million, from ``bench.cost``'s prices.

A model, not a measurement (no AWS account here); its assumptions are printed
with it. ``python -m bench.regions_cost`` prints the tables docs/bench.md shows.

Prices beyond ``bench.cost``'s, us-east-1 list prices checked 2026-11-29: S3
Standard storage $0.023 per GB-month; data transfer between two US regions
$0.02 per GB; S3 Replication Time Control $0.015 per GB (the asynchronous
alternative's, for comparison).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

from bench.cost import DDB_RRU_PER_M, DDB_WRU_PER_M, LAMBDA_GB_SECOND, S3_PUT_PER_M, wru
from infra import spec

S3_GB_MONTH: Final = 0.023
INTER_REGION_GB: Final = 0.02
S3_RTC_GB: Final = 0.015
GIB: Final = 1024**3
# The receiver waits for the other region's PUT alongside its own: what it adds
# to the invocation is the cross-region PUT's extra round trip, an assumption.
PEER_PUT_EXTRA_MS: Final = 60
# Days a large body stays in a payloads bucket: the stage's default payloads_expire_days.
PAYLOADS_DAYS: Final = 90
# An ended job's item (docs/operations.md: about 1.5 KB a job).
ENDED_ITEM_BYTES: Final = 1536
REPLICAS: Final = 2


@dataclass(frozen=True)
class SecondCopy:
    """A million large events of ``size`` bytes, written to the other region's bucket too."""

    size: int

    @property
    def gb(self) -> float:
        return self.size * 1_000_000 / GIB

    @property
    def put(self) -> float:
        return S3_PUT_PER_M

    @property
    def transfer(self) -> float:
        return self.gb * INTER_REGION_GB

    @property
    def storage(self) -> float:
        return self.gb * S3_GB_MONTH * PAYLOADS_DAYS / 30

    @property
    def waiting(self) -> float:
        memory_gb = spec.RECEIVER_MEMORY_MB / 1024
        return 1_000_000 * memory_gb * PEER_PUT_EXTRA_MS / 1000 * LAMBDA_GB_SECOND

    @property
    def total(self) -> float:
        return self.put + self.transfer + self.storage + self.waiting

    @property
    def replication_instead(self) -> float:
        """S3 replication with RTC (asynchronous: lags the failover): its PUT, transfer,
        storage and RTC."""
        return self.put + self.transfer + self.storage + self.gb * S3_RTC_GB


@dataclass(frozen=True)
class Expiry:
    """A million ended jobs of ``item`` bytes deleted by the expiry from the MRSC table."""

    item: int = ENDED_ITEM_BYTES

    @property
    def read(self) -> float:
        # BatchGetItem, eventually consistent: half a read unit per started 4 KB.
        return 1_000_000 * 0.5 * math.ceil(self.item / 4096) * DDB_RRU_PER_M / 1_000_000

    @property
    def delete(self) -> float:
        # A delete is charged by the deleted item's size, in every replica.
        return 1_000_000 * wru(self.item) * REPLICAS * DDB_WRU_PER_M / 1_000_000

    @property
    def total(self) -> float:
        return self.read + self.delete


def report() -> str:
    lines = [
        "| large event | 2nd PUT | transfer | storage (90 days) | receiver's wait | "
        "**total** | S3 replication + RTC instead |",
        "|---|---|---|---|---|---|---|",
    ]
    for kib in (257, 512, 1024):
        copy = SecondCopy(kib * 1024)
        lines.append(
            f"| {kib} KiB | {copy.put:.2f} | {copy.transfer:.2f} | {copy.storage:.2f} | "
            f"{copy.waiting:.2f} | **{copy.total:.2f}** | {copy.replication_instead:.2f} |"
        )
    expiry = Expiry()
    lines += [
        "",
        "| expiry, per million ended jobs | read (BatchGetItem) | delete (both replicas) "
        "| **total** |",
        "|---|---|---|---|",
        f"| {expiry.item} B item | {expiry.read:.2f} | {expiry.delete:.2f} "
        f"| **{expiry.total:.2f}** |",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    print(report())
