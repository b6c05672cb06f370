"""The published event schemas: one per detail-type, valid draft 4, and as built."""

import json

import pytest
from jsonschema import Draft4Validator

from infra import schema_files as schemas
from infra.schema_files import file_name
from infra.spec import SCHEMAS_DIR
from sume.core.names import (
    DETAIL_TYPES,
    EVENT_SOURCE,
    REGISTRATION_DETAIL_TYPE,
    REGISTRATION_REFUSED_DETAIL_TYPE,
)


def load(detail_type):
    return json.loads((SCHEMAS_DIR / file_name(detail_type)).read_text())


def test_the_committed_files_are_the_ones_the_description_builds(capsys):
    assert schemas.main(["--check"]) == 0, capsys.readouterr().out
    assert sorted(p.name for p in SCHEMAS_DIR.glob("*.json")) == sorted(schemas.schemas())


@pytest.mark.parametrize(
    "detail_type",
    [*DETAIL_TYPES.values(), REGISTRATION_REFUSED_DETAIL_TYPE, REGISTRATION_DETAIL_TYPE],
)
def test_each_detail_type_has_a_draft_4_schema_naming_it(detail_type):
    schema = load(detail_type)
    Draft4Validator.check_schema(schema)
    assert schema["$schema"] == "http://json-schema.org/draft-04/schema#"
    assert schema["x-amazon-events-detail-type"] == detail_type
    assert schema["properties"]["detail-type"]["enum"] == [detail_type]
    announced = detail_type != REGISTRATION_DETAIL_TYPE
    assert schema.get("x-amazon-events-source") == (EVENT_SOURCE if announced else None)


def event(detail, **envelope):
    return {
        "version": "0",
        "id": "6a7e8feb-b491-4cf7-a9f1-bf3703467718",
        "detail-type": REGISTRATION_DETAIL_TYPE,
        "source": "com.example.orders",
        "account": "123456789012",
        "time": "2026-11-29T12:00:00Z",
        "region": "eu-west-1",
        "resources": [],
        "detail": detail,
        **envelope,
    }


URL = "https://api.sume.example/v1/jobs/job_1"


@pytest.mark.parametrize(
    "detail",
    [
        {"job_id": "job_1", "status_url": URL},
        {"job_id": "job_1", "status_url": URL, "metadata": {"order": 7}},
        {"job_id": "job_1", "status_url": URL, "metadata": None},
    ],
)
def test_the_registration_schema_takes_what_expect_takes(detail):
    Draft4Validator(load(REGISTRATION_DETAIL_TYPE)).validate(event(detail))


@pytest.mark.parametrize(
    "detail",
    [
        {"status_url": URL},
        {"job_id": "", "status_url": URL},
        {"job_id": "job_1", "status_url": "ftp://x/y"},
        {"job_id": "job_1", "status_url": URL, "metadata": [1]},
        {"job_id": "job_1", "status_url": URL, "metdata": {}},
    ],
)
def test_the_registration_schema_refuses_what_expect_refuses(detail):
    assert not Draft4Validator(load(REGISTRATION_DETAIL_TYPE)).is_valid(event(detail))
