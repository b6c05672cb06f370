"""The events' JSON Schemas in a registry (``infra/schemas/registry.py``)."""

from __future__ import annotations

import json

from infra import spec
from infra.schemas.files import bundled, event_files
from sume.core.names import EVENT_SOURCE
from tests.infra.conftest import Stage, ref_name


def test_the_schema_registry_holds_each_committed_event_schema_bundled(dev: Stage) -> None:
    _, registry = dev.one("SchemasRegistry", "AWS::EventSchemas::Registry")
    assert registry["Properties"]["RegistryName"] == "SumeWebhooks-dev-events"
    published = {
        r["Properties"]["SchemaName"]: r["Properties"]
        for r in dev.of_type("AWS::EventSchemas::Schema").values()
    }
    files = {p.stem: bundled(p) for p in event_files(spec.SCHEMAS_DIR)}
    names = {
        f"{EVENT_SOURCE}@SumeJobCompleted",
        f"{EVENT_SOURCE}@SumeJobFailed",
        f"{EVENT_SOURCE}@SumeJobCanceled",
        f"{EVENT_SOURCE}@SumeJobProcessingError",
        f"{EVENT_SOURCE}@SumeJobLost",
        f"{EVENT_SOURCE}@SumeJobRegistrationRefused",
        "SumeJobSubmitted",
    }
    assert set(published) == names
    assert len(files) == len(names)
    for name, props in published.items():
        assert props["Type"] == "JSONSchemaDraft4"
        assert ref_name(props["RegistryName"]) == "SchemasRegistry"
        content = json.loads(props["Content"])
        assert content == files[name.rpartition("@")[2]]
