"""The jobs table and the S3 buckets (artifacts, large event payloads, access logs)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_s3 as s3
from constructs import Construct

from infra import spec

_ATTRIBUTE_TYPES = {
    "S": dynamodb.AttributeType.STRING,
    "N": dynamodb.AttributeType.NUMBER,
    "B": dynamodb.AttributeType.BINARY,
}


def projection(index: dict[str, Any]) -> dict[str, Any]:
    """The CDK's arguments for an index's projection in ``spec.table_definition``."""
    projected = index["Projection"]
    return {
        "projection_type": dynamodb.ProjectionType[projected["ProjectionType"]],
        "non_key_attributes": projected.get("NonKeyAttributes"),
    }


def key_attributes(definition: dict[str, Any], key_schema: list[dict[str, str]]) -> dict[str, Any]:
    types = {a["AttributeName"]: a["AttributeType"] for a in definition["AttributeDefinitions"]}
    keys = {}
    for key in key_schema:
        role = "partition_key" if key["KeyType"] == "HASH" else "sort_key"
        name = key["AttributeName"]
        keys[role] = dynamodb.Attribute(name=name, type=_ATTRIBUTE_TYPES[types[name]])
    return keys


@dataclass(frozen=True)
class Replication:
    """The jobs table as one MRSC global table: this stack's region, one more, a witness."""

    table_name: str
    """The same in every region: the other region's stack finds its replica by it."""
    replica_region: str
    witness_region: str

    def table_props(self) -> dict[str, Any]:
        """What makes a ``TableV2`` this MRSC global table: its name, replica and witness."""
        return {
            "table_name": self.table_name,
            "billing": dynamodb.Billing.on_demand(),
            "multi_region_consistency": dynamodb.MultiRegionConsistency.STRONG,
            "replicas": [dynamodb.ReplicaTableProps(region=self.replica_region)],
            "witness_region": self.witness_region,
        }


class JobsTableResource(Construct):
    """The jobs table: one item per job; the sparse due-work index; TTL on ``expires_at``.

    The resource only: ``sume.store.jobs.JobsTable`` is the functions' adapter to it.

    Built from ``spec.table_definition`` (what the local stack creates on
    moto), so the deployed keys and index cannot drift from the tested ones.
    Warm throughput (None: DynamoDB's own) is the capacity plan's
    (docs/operations.md, "Capacity plan").
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        is_dev: bool,
        warm_writes_per_second: int | None,
        warm_reads_per_second: int | None,
        replication: Replication | None = None,
        due_index_before: bool = False,
    ) -> None:
        super().__init__(scope, construct_id)
        definition = spec.table_definition("jobs", due_index_before)
        # The index gets the table's: a write the index cannot take throttles
        # the table's write too (infra/capacity.py, planned_write_units).
        warm = (
            dynamodb.WarmThroughput(
                write_units_per_second=warm_writes_per_second,
                read_units_per_second=warm_reads_per_second,
            )
            if warm_writes_per_second or warm_reads_per_second
            else None
        )
        self.table: dynamodb.ITable
        if replication is not None:
            self.table = _global_table(self, definition, is_dev, warm, replication)
            return
        self.table = table = dynamodb.Table(
            self,
            "Table",
            **key_attributes(definition, definition["KeySchema"]),
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            time_to_live_attribute=spec.TTL,
            deletion_protection=not is_dev,
            removal_policy=RemovalPolicy.DESTROY if is_dev else RemovalPolicy.RETAIN,
            warm_throughput=warm,
        )
        for index in definition["GlobalSecondaryIndexes"]:
            table.add_global_secondary_index(
                index_name=index["IndexName"],
                **key_attributes(definition, index["KeySchema"]),
                **projection(index),
                warm_throughput=warm,
            )


def _global_table(
    scope: Construct,
    definition: dict[str, Any],
    is_dev: bool,
    warm: dynamodb.WarmThroughput | None,
    replication: Replication,
) -> dynamodb.TableV2:
    """The MRSC global table: what ``JobsTableResource`` builds, less what MRSC lacks.

    MRSC global tables take no TTL (docs/operations.md, "What MRSC does not
    support"): items keep their ``expires_at`` but nothing deletes them. The
    rest is the single-region table's: on demand, the due-work index, point-in-time
    recovery and deletion protection (on every replica), warm throughput.
    """
    return dynamodb.TableV2(
        scope,
        "GlobalTable",
        **replication.table_props(),
        **key_attributes(definition, definition["KeySchema"]),
        global_secondary_indexes=[
            dynamodb.GlobalSecondaryIndexPropsV2(
                index_name=index["IndexName"],
                **key_attributes(definition, index["KeySchema"]),
                **projection(index),
                warm_throughput=warm,
            )
            for index in definition["GlobalSecondaryIndexes"]
        ],
        point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
            point_in_time_recovery_enabled=True
        ),
        deletion_protection=not is_dev,
        removal_policy=RemovalPolicy.DESTROY if is_dev else RemovalPolicy.RETAIN,
        warm_throughput=warm,
    )


class Buckets(Construct):
    """Artifacts (the worker's archive) and payloads (events over the item size)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        is_dev: bool,
        payloads_expire_days: int,
        artifacts_infrequent_access_days: int,
        payloads_bucket_name: str | None = None,
    ) -> None:
        """``payloads_bucket_name``: two regions only, where the other region's
        functions write and read it by its name (``infra.stack.payloads_bucket_name``)."""
        super().__init__(scope, construct_id)
        self._is_dev = is_dev
        self.access_logs = self._bucket(
            "AccessLogs",
            None,
            [s3.LifecycleRule(id="expire-access-logs", expiration=Duration.days(365))],
        )
        abort_uploads = Duration.days(1)
        self.artifacts = self._bucket(
            "Artifacts",
            self.access_logs,
            [
                s3.LifecycleRule(
                    id="tier-and-clean-artifacts",
                    abort_incomplete_multipart_upload_after=abort_uploads,
                    transitions=[
                        s3.Transition(
                            storage_class=s3.StorageClass.INFREQUENT_ACCESS,
                            transition_after=Duration.days(artifacts_infrequent_access_days),
                        )
                    ],
                )
            ],
        )
        self.payloads = self._bucket(
            "Payloads",
            self.access_logs,
            [
                s3.LifecycleRule(
                    id="expire-payloads",
                    abort_incomplete_multipart_upload_after=abort_uploads,
                    expiration=Duration.days(payloads_expire_days),
                )
            ],
            bucket_name=payloads_bucket_name,
        )

    def _bucket(
        self,
        construct_id: str,
        access_logs: s3.IBucket | None,
        lifecycle_rules: list[s3.LifecycleRule],
        bucket_name: str | None = None,
    ) -> s3.Bucket:
        return s3.Bucket(
            self,
            construct_id,
            bucket_name=bucket_name,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            # SSE-S3: server access logs can only be delivered to SSE-S3 buckets,
            # and it needs no key grants for the functions.
            encryption=s3.BucketEncryption.S3_MANAGED,
            enforce_ssl=True,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            server_access_logs_bucket=access_logs,
            server_access_logs_prefix=f"{construct_id.lower()}/" if access_logs else None,
            lifecycle_rules=lifecycle_rules,
            removal_policy=RemovalPolicy.DESTROY if self._is_dev else RemovalPolicy.RETAIN,
            auto_delete_objects=self._is_dev,
        )
