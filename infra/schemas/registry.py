"""The events on the bus as a published API: an EventBridge schema registry.

Each event's JSON Schema committed in ``schemas/`` becomes one schema of the
registry, bundled with the files it refers to (``infra.schemas.files.bundled``),
since the registry takes self-contained documents: the files are the one
source of truth, so consumers who download code bindings from the registry and
those who read the repository see the same contract. Its name follows
EventBridge's ``source@DetailType`` where the source is fixed (announcements),
the detail-type alone otherwise.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aws_cdk import aws_eventschemas as eventschemas
from constructs import Construct

from infra import spec
from infra.schemas.files import bundled, event_files, text, type_name

SCHEMA_TYPE = "JSONSchemaDraft4"


def schema_name(schema: dict[str, Any]) -> str:
    name = type_name(schema["x-amazon-events-detail-type"])
    source = schema.get("x-amazon-events-source")
    return f"{source}@{name}" if source else name


class EventSchemas(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        registry_name: str,
        directory: Path = spec.SCHEMAS_DIR,
    ) -> None:
        super().__init__(scope, construct_id)
        self.registry = eventschemas.CfnRegistry(
            self,
            "Registry",
            registry_name=registry_name,
            description="Events on the Sume webhooks bus: announcements and registrations",
        )
        self.schemas = []
        for path in event_files(directory):
            schema = bundled(path)
            self.schemas.append(
                eventschemas.CfnSchema(
                    self,
                    # Logical ids stay the files' names: a new id would replace the schema
                    # by one of the same name, which CloudFormation cannot create.
                    path.stem,
                    registry_name=self.registry.attr_registry_name,
                    schema_name=schema_name(schema),
                    type=SCHEMA_TYPE,
                    content=text(schema),
                    description=schema["description"],
                )
            )
