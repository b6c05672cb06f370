"""The jobs table and the buckets (``infra/storage.py``), and what outlives a prod stack."""

from __future__ import annotations

from infra import spec
from sume.core.names import (
    DUE_INDEX,
    DUE_INDEX_BEFORE,
    DUE_PROJECTED,
    REPORT_INDEX,
    TTL_ATTRIBUTE,
)
from tests.infra.conftest import Stage, base_name, ref_name


def test_jobs_table_on_demand_pitr_ttl_and_the_sparse_indexes(dev: Stage) -> None:
    # The keys and indexes are spec.py's, which the local stack creates on moto:
    # one definition, so the two cannot drift.
    moto = spec.table_definition("x")
    dev.assertions().has_resource_properties(
        "AWS::DynamoDB::Table",
        {
            "BillingMode": "PAY_PER_REQUEST",
            "KeySchema": moto["KeySchema"],
            "PointInTimeRecoverySpecification": {"PointInTimeRecoveryEnabled": True},
            "TimeToLiveSpecification": {"AttributeName": TTL_ATTRIBUTE, "Enabled": True},
            "GlobalSecondaryIndexes": moto["GlobalSecondaryIndexes"],
        },
    )
    _, table = dev.one("JobsTable", "AWS::DynamoDB::Table")
    assert table["Properties"]["GlobalSecondaryIndexes"] == moto["GlobalSecondaryIndexes"]
    assert [index["IndexName"] for index in moto["GlobalSecondaryIndexes"]] == [
        DUE_INDEX,
        REPORT_INDEX,
    ]
    # The due-work index holds what its readers read, not the whole item.
    assert moto["GlobalSecondaryIndexes"][0]["Projection"] == {
        "ProjectionType": "INCLUDE",
        "NonKeyAttributes": list(DUE_PROJECTED),
    }
    assert sorted(table["Properties"]["AttributeDefinitions"], key=str) == sorted(
        moto["AttributeDefinitions"], key=str
    )


def test_warm_throughput_is_set_by_context_on_the_table_and_its_indexes(
    dev: Stage, prod: Stage
) -> None:
    _, dev_table = dev.one("JobsTable", "AWS::DynamoDB::Table")
    # The default estimate (2 jobs/s) plans far less than a new table serves: none set.
    assert "WarmThroughput" not in dev_table["Properties"]
    for dev_index in dev_table["Properties"]["GlobalSecondaryIndexes"]:
        assert "WarmThroughput" not in dev_index
    _, prod_table = prod.one("JobsTable", "AWS::DynamoDB::Table")
    warm = {"WriteUnitsPerSecond": 5000, "ReadUnitsPerSecond": 15000}
    assert prod_table["Properties"]["WarmThroughput"] == warm
    # An index takes the table's writes: warmed alike, or it would throttle them.
    indexes = prod_table["Properties"]["GlobalSecondaryIndexes"]
    assert [index["WarmThroughput"] for index in indexes] == [warm, warm, warm]


def test_a_migrating_table_keeps_the_due_index_it_had_beside_the_new(
    dev: Stage, prod: Stage
) -> None:
    # prod is the first step of a migration (due_index_migration=add): the new
    # index is added, the old one (projecting ALL) kept; dev is a table after it.
    _, prod_table = prod.one("JobsTable", "AWS::DynamoDB::Table")
    indexes = {i["IndexName"]: i for i in prod_table["Properties"]["GlobalSecondaryIndexes"]}
    assert set(indexes) == {DUE_INDEX, REPORT_INDEX, DUE_INDEX_BEFORE}
    assert indexes[DUE_INDEX_BEFORE]["Projection"] == {"ProjectionType": "ALL"}
    assert indexes[DUE_INDEX_BEFORE]["KeySchema"] == indexes[DUE_INDEX]["KeySchema"]
    _, dev_table = dev.one("JobsTable", "AWS::DynamoDB::Table")
    names = [i["IndexName"] for i in dev_table["Properties"]["GlobalSecondaryIndexes"]]
    assert names == [DUE_INDEX, REPORT_INDEX]


def test_data_is_retained_and_protected_outside_dev(dev: Stage, prod: Stage) -> None:
    _, prod_table = prod.one("JobsTable", "AWS::DynamoDB::Table")
    assert prod_table["DeletionPolicy"] == prod_table["UpdateReplacePolicy"] == "Retain"
    assert prod_table["Properties"]["DeletionProtectionEnabled"] is True
    _, dev_table = dev.one("JobsTable", "AWS::DynamoDB::Table")
    assert dev_table["DeletionPolicy"] == "Delete"
    assert dev_table["Properties"].get("DeletionProtectionEnabled") is False
    for kind in ("AWS::S3::Bucket", "AWS::SecretsManager::Secret", "AWS::SQS::Queue"):
        assert {r["DeletionPolicy"] for r in prod.of_type(kind).values()} == {"Retain"}
        assert {r["DeletionPolicy"] for r in dev.of_type(kind).values()} == {"Delete"}
    # Emptying buckets on delete exists only where deleting is the point.
    assert len(dev.of_type("Custom::S3AutoDeleteObjects")) == 3
    assert not prod.of_type("Custom::S3AutoDeleteObjects")


def test_buckets_are_private_encrypted_tls_only_and_expire_data(dev: Stage, prod: Stage) -> None:
    for stage in (dev, prod):
        buckets = stage.of_type("AWS::S3::Bucket")
        assert {base_name(k) for k in buckets} == {
            "BucketsArtifacts",
            "BucketsPayloads",
            "BucketsAccessLogs",
        }
        for bucket in buckets.values():
            props = bucket["Properties"]
            assert props["PublicAccessBlockConfiguration"] == {
                "BlockPublicAcls": True,
                "BlockPublicPolicy": True,
                "IgnorePublicAcls": True,
                "RestrictPublicBuckets": True,
            }
            (encryption,) = props["BucketEncryption"]["ServerSideEncryptionConfiguration"]
            assert encryption["ServerSideEncryptionByDefault"]["SSEAlgorithm"] == "AES256"
            assert props["LifecycleConfiguration"]["Rules"]
        for policy in stage.of_type("AWS::S3::BucketPolicy").values():
            statements = policy["Properties"]["PolicyDocument"]["Statement"]
            assert any(
                s["Effect"] == "Deny"
                and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
                for s in statements
            )
    _, payloads = prod.one("BucketsPayloads", "AWS::S3::Bucket")
    (rule,) = payloads["Properties"]["LifecycleConfiguration"]["Rules"]
    assert rule["ExpirationInDays"] == 120
    for base in ("BucketsArtifacts", "BucketsPayloads"):
        _, bucket = dev.one(base, "AWS::S3::Bucket")
        logging = bucket["Properties"]["LoggingConfiguration"]
        assert ref_name(logging["DestinationBucketName"]) == "BucketsAccessLogs"
