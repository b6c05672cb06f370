"""The JSON Schemas of the events on the stack's bus, written to ``schemas/``.

The files in ``schemas/`` are the published API: integrators validate events
and generate bindings from them, and the stack registers each event in its
EventBridge schema registry (``infra.schemas.registry``). They share most of their
text, so they are built here from one description and committed; ``--check``
(run by the tests) fails when a file and this description disagree.

Every file is JSON Schema draft 4, in three kinds:

- ``<DetailType>.json``, one per detail-type: the whole event, with the
  ``x-amazon-events-*`` names EventBridge's registry uses; titled
  ``<DetailType>Event`` so that the name of the detail-type is the detail's.
- ``detail/<DetailType>.json``: the detail alone, titled ``<DetailType>``, so a
  sender can check a ``Detail`` before ``PutEvents``.
- ``detail/definitions.json``: what several details share (``Artifact``,
  ``Outcome``, ...), defined once and referenced, so a code generator given
  every file makes one type of each.

The files refer to each other by relative path. The registry takes
self-contained documents only: ``bundled`` inlines what an event's file refers
to into its ``definitions``, the form EventBridge's registry exports.

Enums are read from their one home in the code: detail-types from
``sume.core.names``, Sume's events and outcomes from ``sume.contract.envelope``,
registration refusal reasons from ``sume.polling.registration``.

``python -m infra.schemas.files`` rewrites the files; ``--check`` only compares.
"""

from __future__ import annotations

import argparse
import json
import posixpath
import re
import sys
from pathlib import Path
from typing import Any, Final

from infra.spec import SCHEMAS_DIR
from sume.contract.envelope import TERMINAL_EVENTS
from sume.core.names import (
    DETAIL_TYPES,
    EVENT_SOURCE,
    REGISTRATION_DETAIL_TYPE,
    REGISTRATION_REFUSED_DETAIL_TYPE,
)
from sume.polling.registration import REFUSAL_REASONS

DRAFT_4: Final = "http://json-schema.org/draft-04/schema#"
DETAIL_DIR: Final = "detail"
DEFINITIONS_FILE: Final = "definitions.json"
# What sume.working.announce writes: its times, and each artifact's ARN.
ISO_SECOND: Final = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$"
S3_OBJECT_ARN: Final = r"^arn:aws[a-z-]*:s3:::[^/]+/.+$"

STRING: Final = {"type": "string"}
NULL: Final = {"type": "null"}
BOOLEAN: Final = {"type": "boolean"}
COUNT: Final = {"type": "integer", "minimum": 0}
VERSION: Final = {"type": "integer", "enum": [1]}
NO_RESOURCES: Final = {"type": "array", "items": STRING, "maxItems": 0}

OUTCOMES: Final = list(dict.fromkeys(TERMINAL_EVENTS.values()))
EVENTS: Final = list(TERMINAL_EVENTS)

DEFINITIONS: Final = {
    "Artifact": {
        "type": "object",
        "description": "One artifact stored in the artifacts bucket.",
        "required": ["bucket", "key", "uri", "size", "sha256", "content_type", "source_url"],
        "properties": {
            "bucket": STRING,
            "key": STRING,
            "uri": {"type": "string", "pattern": "^s3://", "description": "s3://bucket/key"},
            "size": {**COUNT, "description": "Bytes stored."},
            "sha256": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
            "content_type": STRING,
            "source_url": {
                "type": "string",
                "description": "Where Sume served it, without query string or user info.",
            },
        },
    },
    "ProcessingError": {
        "type": "object",
        "description": "Why the follow-up work could not be done; retrying could not fix it.",
        "required": ["code", "message"],
        "properties": {
            "code": {
                "type": "string",
                "description": "e.g. http_404, invalid_artifacts, unreadable_event, "
                "too_many_attempts (an open list: http_<status> for every status).",
            },
            "message": STRING,
            "url": {"type": "string", "description": "The URL concerned, redacted."},
        },
    },
    "Outcome": {
        "type": "string",
        "enum": OUTCOMES,
        "description": "How Sume says the job ended.",
    },
    "Event": {
        "type": "string",
        "enum": EVENTS,
        "description": "The name of Sume's terminal event.",
    },
    "Metadata": {
        "type": ["object", "null"],
        "description": "The metadata the job was registered with (bounded as at "
        "registration); null when it was registered without, or not registered.",
    },
    "RefusalReason": {
        "type": "string",
        "enum": list(REFUSAL_REASONS),
        "description": "Why the registration event was refused (docs/integrating.md).",
    },
}


def type_name(detail_type: str) -> str:
    """The detail-type without spaces: the detail's title, the files' names."""
    return detail_type.replace(" ", "")


def file_name(detail_type: str) -> str:
    """The file of the whole event, in ``schemas/``."""
    return f"{type_name(detail_type)}.json"


def detail_file_name(detail_type: str) -> str:
    """The file of the detail alone, in ``schemas/``."""
    return f"{DETAIL_DIR}/{type_name(detail_type)}.json"


def _shared(name: str) -> dict[str, str]:
    """A reference, from a file in ``detail/``, to one of ``DEFINITIONS``."""
    assert name in DEFINITIONS
    return {"$ref": f"{DEFINITIONS_FILE}#/definitions/{name}"}


def _iso_second(description: str, nullable: bool = False) -> dict[str, Any]:
    return {
        "type": ["string", "null"] if nullable else "string",
        "format": "date-time",
        "pattern": ISO_SECOND,
        "description": description,
    }


def _only(values: dict[str, list[str]]) -> dict[str, Any]:
    """A ``not`` that narrows shared enums to one detail-type's values.

    The properties refer to the shared enum, so bindings get one ``Outcome``
    type; code generators ignore ``not``, validators apply it.
    """
    return {
        "description": "Only this detail-type's values.",
        "anyOf": [
            {"required": [field], "properties": {field: {"enum": others}}}
            for field, others in values.items()
        ],
    }


def _detail(
    detail_type: str,
    description: str,
    properties: dict[str, Any],
    required: list[str] | None = None,
    **rest: Any,
) -> dict[str, Any]:
    return {
        "$schema": DRAFT_4,
        "title": type_name(detail_type),
        "description": f"{description} Version 1: fields are only ever added; "
        "a change of meaning bumps version.",
        "type": "object",
        "required": list(properties) if required is None else required,
        "properties": properties,
        **rest,
    }


def _job_fields() -> dict[str, Any]:
    """What every announcement of a job carries first."""
    return {
        "version": VERSION,
        "job_id": {"type": "string", "minLength": 1, "description": "Sume's job id."},
        "sequence": {
            "type": "integer",
            "minimum": 1,
            "description": "This job's announcements, numbered from 1; a copy of one "
            "announcement keeps its number. Dedupe on (job_id, sequence).",
        },
        "metadata": _shared("Metadata"),
    }


def _lost_before() -> dict[str, Any]:
    return _iso_second("When the poller gave the job up as lost; null if never.", True)


def announcement_detail(result: str) -> dict[str, Any]:
    """The detail of a processed job's announcement (``result`` as in ``DETAIL_TYPES``)."""
    detail_type = DETAIL_TYPES[result]
    finished = result in OUTCOMES
    properties: dict[str, Any] = {
        **_job_fields(),
        "lost_at": _lost_before(),
        "outcome": (
            _shared("Outcome")
            if finished
            else {
                "anyOf": [_shared("Outcome"), NULL],
                "description": "Sume's outcome; null when the stored event was unreadable.",
            }
        ),
        "event": _shared("Event") if finished else {"type": ["string", "null"]},
        "status": (
            {"type": "string", "description": "Sume's status as it sent it (OK, ERROR)."}
            if finished
            else {"type": ["string", "null"]}
        ),
        "error": (
            NULL
            if result == "completed"
            else {
                "description": (
                    "Sume's error as it sent it, or, when error_truncated, an object "
                    "with its code and message strings cut short; null if none."
                )
            }
        ),
        "error_truncated": BOOLEAN,
        "processing_error": NULL if finished else _shared("ProcessingError"),
        "artifacts": {
            "type": "array",
            "description": "The first stored artifacts, in Sume's order.",
            "items": _shared("Artifact"),
        },
        "artifact_count": {**COUNT, "description": "How many artifacts were stored."},
        "artifacts_truncated": {
            "type": "boolean",
            "description": "Some stored artifacts are left out of artifacts and resources.",
        },
        "processed_at": _iso_second("When the job was processed."),
        "replay": {"type": "boolean", "description": "An operator replayed the job."},
    }
    narrowed: dict[str, Any] = (
        {
            "not": _only(
                {
                    "outcome": [o for o in OUTCOMES if o != result],
                    "event": [e for e in EVENTS if TERMINAL_EVENTS[e] != result],
                }
            )
        }
        if finished
        else {}
    )
    return _detail(detail_type, f"A processed job: {detail_type}.", properties, **narrowed)


def lost_detail() -> dict[str, Any]:
    detail_type = DETAIL_TYPES["lost"]
    return _detail(
        detail_type,
        "The poller gave the job up: no terminal answer before the registration's cut-off.",
        {
            **_job_fields(),
            "registered_at": _iso_second("When the job was registered for status polling.", True),
            "lost_at": _iso_second("When the poller gave the job up as lost."),
            "polls": {**COUNT, "description": "Status polls made."},
            "last_poll_error": {
                "type": ["string", "null"],
                "description": "Why the last status poll got no usable answer, a code "
                "(refused_host, http_503, timeout, ...; an open list); null if none.",
            },
            "replay": {"type": "boolean", "description": "An operator replayed the job."},
        },
    )


def refused_detail() -> dict[str, Any]:
    return _detail(
        REGISTRATION_REFUSED_DETAIL_TYPE,
        "A registration event was refused for good (it is in the registrations DLQ too).",
        {
            "version": VERSION,
            "reason": _shared("RefusalReason"),
            "message": {
                "type": "string",
                "description": "Which rule it broke, for people; at most 1 KiB.",
            },
            "job_id": {
                "type": ["string", "null"],
                "description": "The event's job_id when it could be read; null otherwise.",
            },
            "registration_event_id": {
                "type": ["string", "null"],
                "description": "The id of the application's event that was refused; null "
                "when the message was no readable event.",
            },
            "refused_at": _iso_second("When the poller refused it."),
        },
    )


def registration_detail() -> dict[str, Any]:
    """What an application puts: self-contained, so any validator takes it alone."""
    return _detail(
        REGISTRATION_DETAIL_TYPE,
        "What sume.polling.registry.expect takes; any other field is refused.",
        {
            "job_id": {"type": "string", "minLength": 1, "description": "Sume's job id."},
            "status_url": {
                "type": "string",
                "maxLength": 2048,
                "pattern": "^[Hh][Tt][Tt][Pp][Ss]?://",
                "description": "The job's status URL as Sume returned it: https (http only "
                "on the local stack), no user info, its host on the stack's "
                "status_allowed_hosts; else refused with the poller's reason code.",
            },
            "metadata": {
                "type": ["object", "null"],
                "description": "Kept on the job item, every number exactly; at most 64 KiB "
                "as JSON and what DynamoDB stores: at most 32 levels (the object itself the "
                "first), non-empty keys, numbers of at most 38 significant digits between "
                "1E-130 and 9.9999999999999999999999999999999999999E+125 in magnitude (or 0). "
                "Anything else is refused into the registrations DLQ.",
            },
        },
        required=["job_id", "status_url"],
        additionalProperties=False,
    )


def _literal(value: str) -> dict[str, Any]:
    """A string that is ``value``, said by a pattern: Go bindings make every enum value
    a package-level constant, and ``SumeJobCompleted = "Sume Job Completed"`` would
    take the detail's name."""
    assert re.fullmatch("[A-Za-z ]+", value), value
    return {"type": "string", "pattern": f"^{value}$"}


def _event(
    detail_type: str, description: str, source: str | None, resources: dict[str, Any]
) -> dict[str, Any]:
    """A whole EventBridge event whose ``detail`` is the detail-type's own file."""
    schema: dict[str, Any] = {
        "$schema": DRAFT_4,
        "title": f"{type_name(detail_type)}Event",
        "description": description,
        "type": "object",
        "x-amazon-events-detail-type": detail_type,
    }
    if source is not None:
        schema["x-amazon-events-source"] = source
    schema["required"] = [
        "version",
        "id",
        "detail-type",
        "source",
        "account",
        "time",
        "region",
        "resources",
        "detail",
    ]
    schema["properties"] = {
        "version": STRING,
        "id": STRING,
        "detail-type": _literal(detail_type),
        "source": STRING if source is None else {"type": "string", "enum": [source]},
        "account": STRING,
        "time": {"type": "string", "format": "date-time"},
        "region": STRING,
        "resources": resources,
        "detail": {"$ref": detail_file_name(detail_type)},
    }
    return schema


ARTIFACT_ARNS: Final = {
    "type": "array",
    "description": "The S3 object ARN of each artifact in detail.artifacts, in order.",
    "items": {"type": "string", "pattern": S3_OBJECT_ARN},
}


def schemas() -> dict[str, dict[str, Any]]:
    """Path in ``schemas/`` -> schema: each event, each detail, the shared definitions."""
    details = {result: announcement_detail(result) for result in OUTCOMES}
    details["processing_error"] = announcement_detail("processing_error")
    details["lost"] = lost_detail()
    assert set(details) == set(DETAIL_TYPES)
    events: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
        DETAIL_TYPES[result]: (detail, ARTIFACT_ARNS if result != "lost" else NO_RESOURCES)
        for result, detail in details.items()
    }
    events[REGISTRATION_REFUSED_DETAIL_TYPE] = (refused_detail(), NO_RESOURCES)
    built: dict[str, dict[str, Any]] = {}
    for detail_type, (detail, resources) in events.items():
        built[file_name(detail_type)] = _event(
            detail_type, f"Announced by sume-webhooks: {detail_type}.", EVENT_SOURCE, resources
        )
        built[detail_file_name(detail_type)] = detail
    built[file_name(REGISTRATION_DETAIL_TYPE)] = _event(
        REGISTRATION_DETAIL_TYPE,
        "Put by an application on the stack's bus, with a source of its own, to have "
        "sume-webhooks watch a job it submitted to Sume.",
        None,
        {"type": "array", "items": STRING},
    )
    built[detail_file_name(REGISTRATION_DETAIL_TYPE)] = registration_detail()
    built[f"{DETAIL_DIR}/{DEFINITIONS_FILE}"] = {
        "$schema": DRAFT_4,
        "description": "What the details share, defined once so bindings have one type each.",
        "definitions": DEFINITIONS,
    }
    return built


def event_files(directory: Path = SCHEMAS_DIR) -> list[Path]:
    """The whole-event schemas in ``directory``: one per detail-type on the bus."""
    return sorted(directory.glob("*.json"))


def bundled(path: Path) -> dict[str, Any]:
    """The event schema at ``path``, self-contained: what the schema registry holds.

    Each file it refers to (relative to the referring file) is inlined under
    ``definitions``: a whole file by its title, a ``#/definitions/<name>`` of
    a file by that name.
    """
    root = path.parent
    definitions: dict[str, Any] = {}
    loaded: dict[str, Any] = {}

    def load(name: str) -> Any:
        if name not in loaded:
            loaded[name] = json.loads((root / name).read_text(encoding="utf-8"))
        return loaded[name]

    def inline(node: Any, base: str) -> Any:
        if isinstance(node, list):
            return [inline(item, base) for item in node]
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        if not isinstance(ref, str):
            return {key: inline(value, base) for key, value in node.items()}
        target, _, fragment = ref.partition("#")
        name = posixpath.normpath(posixpath.join(posixpath.dirname(base), target or base))
        document = load(name)
        if fragment:
            prefix, _, key = fragment.rpartition("/")
            assert prefix == "/definitions", ref
            found = document["definitions"][key]
        else:
            key = document["title"]
            found = {k: v for k, v in document.items() if k != "$schema"}
        if key not in definitions:
            definitions[key] = None  # claimed first, so a cycle ends
            definitions[key] = inline(found, name)
        return {"$ref": f"#/definitions/{key}"}

    event = inline(load(path.name), path.name)
    return {**event, "definitions": definitions}


def text(schema: dict[str, Any]) -> str:
    return json.dumps(schema, indent=2) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m infra.schemas.files", description=__doc__)
    parser.add_argument("--check", action="store_true", help="compare only; exit 1 on a change")
    args = parser.parse_args(argv)
    stale = []
    for name, schema in schemas().items():
        path = SCHEMAS_DIR / name
        wanted = text(schema)
        if path.exists() and path.read_text() == wanted:
            continue
        stale.append(name)
        if not args.check:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(wanted)
    present = {p.relative_to(SCHEMAS_DIR).as_posix() for p in SCHEMAS_DIR.rglob("*.json")}
    extra = sorted(present - set(schemas()))
    for name in stale:
        print(f"{'out of date' if args.check else 'written'}: schemas/{name}")
    for name in extra:
        print(f"not an event on the bus: schemas/{name}")
    return 1 if (args.check and stale) or extra else 0


if __name__ == "__main__":
    sys.exit(main())
