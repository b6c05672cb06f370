"""The published event schemas: one per detail-type, valid draft 4, and as built."""

import json

import pytest
from jsonschema import Draft4Validator

from infra.schemas import files as schemas
from infra.schemas.files import bundled, detail_file_name, file_name
from infra.spec import SCHEMAS_DIR
from sume.core.names import (
    DETAIL_TYPES,
    EVENT_SOURCE,
    REGISTRATION_DETAIL_TYPE,
    REGISTRATION_REFUSED_DETAIL_TYPE,
)
from sume.polling import registration

ANNOUNCED = [*DETAIL_TYPES.values(), REGISTRATION_REFUSED_DETAIL_TYPE]
EVERY_TYPE = [*ANNOUNCED, REGISTRATION_DETAIL_TYPE]


def load(name):
    return json.loads((SCHEMAS_DIR / name).read_text())


def refs(node):
    if isinstance(node, dict):
        if isinstance(node.get("$ref"), str):
            yield node["$ref"]
        for value in node.values():
            yield from refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from refs(value)


def test_the_committed_files_are_the_ones_the_description_builds(capsys):
    assert schemas.main(["--check"]) == 0, capsys.readouterr().out
    present = {p.relative_to(SCHEMAS_DIR).as_posix() for p in SCHEMAS_DIR.rglob("*.json")}
    assert present == set(schemas.schemas())


def test_a_stray_file_in_schemas_is_named(tmp_path, monkeypatch, capsys):
    for name, schema in schemas.schemas().items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(schemas.text(schema))
    (tmp_path / "detail" / "Old.json").write_text("{}")
    monkeypatch.setattr(schemas, "SCHEMAS_DIR", tmp_path)

    assert schemas.main(["--check"]) == 1
    assert "not an event on the bus: schemas/detail/Old.json" in capsys.readouterr().out


@pytest.mark.parametrize("detail_type", EVERY_TYPE)
def test_each_detail_type_has_a_draft_4_schema_naming_it(detail_type):
    schema = load(file_name(detail_type))
    Draft4Validator.check_schema(schema)
    assert schema["$schema"] == "http://json-schema.org/draft-04/schema#"
    assert schema["x-amazon-events-detail-type"] == detail_type
    assert Draft4Validator(schema["properties"]["detail-type"]).is_valid(detail_type)
    assert not Draft4Validator(schema["properties"]["detail-type"]).is_valid(f"{detail_type}s")
    announced = detail_type in ANNOUNCED
    assert schema.get("x-amazon-events-source") == (EVENT_SOURCE if announced else None)
    name = detail_type.replace(" ", "")
    assert (schema["title"], load(detail_file_name(detail_type))["title"]) == (
        f"{name}Event",
        name,
    )


@pytest.mark.parametrize("detail_type", EVERY_TYPE)
def test_each_bundled_schema_stands_alone_and_keeps_every_definition(detail_type):
    schema = bundled(SCHEMAS_DIR / file_name(detail_type))
    Draft4Validator.check_schema(schema)
    name = detail_type.replace(" ", "")
    assert schema["properties"]["detail"] == {"$ref": f"#/definitions/{name}"}
    for ref in refs(schema):
        assert ref.startswith("#/definitions/"), ref
        assert ref.removeprefix("#/definitions/") in schema["definitions"]
    assert "$schema" not in schema["definitions"][name]


def test_the_details_share_one_definition_of_each_type():
    shared = load("detail/definitions.json")["definitions"]
    used = {ref for detail_type in EVERY_TYPE for ref in refs(load(detail_file_name(detail_type)))}
    assert used == {f"definitions.json#/definitions/{name}" for name in shared}


def test_the_refusal_reasons_are_the_codes_the_registration_refuses_with():
    reason = load("detail/definitions.json")["definitions"]["RefusalReason"]
    assert reason["enum"] == list(registration.REFUSAL_REASONS)
    assert {"invalid_registration", "refused_by_dynamodb", "malformed_event"} <= set(reason["enum"])


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
REGISTERED = [
    {"job_id": "job_1", "status_url": URL},
    {"job_id": "job_1", "status_url": URL, "metadata": {"order": 7}},
    {"job_id": "job_1", "status_url": URL, "metadata": None},
]
REFUSED = [
    {"status_url": URL},
    {"job_id": "", "status_url": URL},
    {"job_id": "job_1", "status_url": "ftp://x/y"},
    {"job_id": "job_1", "status_url": URL, "metadata": [1]},
    {"job_id": "job_1", "status_url": URL, "metdata": {}},
]


def registration_schemas():
    whole = Draft4Validator(bundled(SCHEMAS_DIR / file_name(REGISTRATION_DETAIL_TYPE)))
    detail = load(detail_file_name(REGISTRATION_DETAIL_TYPE))
    return whole, Draft4Validator(detail)


@pytest.mark.parametrize("detail", REGISTERED)
def test_the_registration_schemas_take_what_expect_takes(detail):
    whole, alone = registration_schemas()
    whole.validate(event(detail))
    alone.validate(detail)


@pytest.mark.parametrize("detail", REFUSED)
def test_the_registration_schemas_refuse_what_expect_refuses(detail):
    whole, alone = registration_schemas()
    assert not whole.is_valid(event(detail))
    assert not alone.is_valid(detail)


def test_the_registration_detail_alone_needs_no_other_file():
    detail = load(detail_file_name(REGISTRATION_DETAIL_TYPE))
    assert list(refs(detail)) == []
