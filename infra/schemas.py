"""The events on the bus as a published API: an EventBridge schema registry.

Each JSON Schema committed in ``schemas/`` becomes one schema of the registry,
as it is: the files are the one source of truth, so consumers who download
code bindings from the registry and those who read the repository see the
same contract. Its name follows EventBridge's ``source@DetailType`` where the
source is fixed (announcements), the detail-type alone otherwise.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from aws_cdk import aws_eventschemas as eventschemas
from constructs import Construct

from infra import spec

SCHEMA_TYPE = "JSONSchemaDraft4"


def schema_name(schema: dict[str, Any]) -> str:
    source = schema.get("x-amazon-events-source")
    return f"{source}@{schema['title']}" if source else str(schema["title"])


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
        for path in sorted(directory.glob("*.json")):
            text = path.read_text(encoding="utf-8")
            schema = json.loads(text)
            self.schemas.append(
                eventschemas.CfnSchema(
                    self,
                    schema["title"],
                    registry_name=self.registry.attr_registry_name,
                    schema_name=schema_name(schema),
                    type=SCHEMA_TYPE,
                    content=text,
                    description=schema["description"],
                )
            )
