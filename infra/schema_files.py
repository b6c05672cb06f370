"""The JSON Schemas of the events on the stack's bus, written to ``schemas/``.

The files in ``schemas/`` are the published API: the stack registers each in
its EventBridge schema registry (``infra.schemas``) and integrators read or
generate bindings from them. They share most of their text, so they are built
here from one description and committed; ``--check`` (run by the tests) fails
when a file and this description disagree.

Each file is a JSON Schema draft 4 document in the form EventBridge's schema
registry exports (type ``JSONSchemaDraft4``): the whole event, its ``detail``
in ``definitions``, and the ``x-amazon-events-*`` names code bindings use.

``python -m infra.schema_files`` rewrites the files; ``--check`` only compares.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from typing import Any, Final

from infra.spec import SCHEMAS_DIR
from sume.core.names import (
    DETAIL_TYPES,
    EVENT_SOURCE,
    REGISTRATION_DETAIL_TYPE,
    REGISTRATION_REFUSED_DETAIL_TYPE,
)
from sume.polling.registration import REFUSAL_REASONS

DRAFT_4: Final = "http://json-schema.org/draft-04/schema#"
# What sume.working.announce writes: processed_at, and each artifact's ARN.
ISO_SECOND: Final = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$"
S3_OBJECT_ARN: Final = r"^arn:aws[a-z-]*:s3:::[^/]+/.+$"

STRING: Final = {"type": "string"}
NULL: Final = {"type": "null"}
BOOLEAN: Final = {"type": "boolean"}
COUNT: Final = {"type": "integer", "minimum": 0}
ISO_SECOND_OR_NULL: Final = {"type": ["string", "null"], "pattern": ISO_SECOND}
# The results a processed job is announced with (DETAIL_TYPES less "lost").
PROCESSED: Final = [r for r in DETAIL_TYPES if r != "lost"]
# What every announcement of a job carries besides its own fields.
JOB_FIELDS: Final = {
    "sequence": {
        "type": "integer",
        "minimum": 1,
        "description": "The job's announcement number: copies of one announcement share it, "
        "each later one (a replay, a completion after lost) is higher. Dedupe on "
        "(job_id, sequence).",
    },
    "metadata": {
        "type": ["object", "null"],
        "description": "The registration's metadata, as registered; null without one.",
    },
    "lost_at": {
        **ISO_SECOND_OR_NULL,
        "description": "When the poller gave the job up as lost before this announcement; "
        "null if it never was.",
    },
}

ARTIFACT: Final = {
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
}
PROCESSING_ERROR: Final = {
    "type": "object",
    "description": "Why the follow-up work could not be done; retrying could not fix it.",
    "required": ["code", "message"],
    "properties": {
        "code": {"type": "string", "description": "e.g. http_404, too_many_attempts"},
        "message": STRING,
        "url": {"type": "string", "description": "The URL concerned, redacted."},
    },
}


def _name(detail_type: str) -> str:
    return detail_type.replace(" ", "")


def file_name(detail_type: str) -> str:
    return f"{_name(detail_type)}.json"


def _event(
    detail_type: str,
    description: str,
    detail: dict[str, Any],
    source: str | None,
    resources: dict[str, Any],
    definitions: Mapping[str, Any],
) -> dict[str, Any]:
    """A whole EventBridge event whose ``detail`` is the definition named after the type."""
    name = _name(detail_type)
    schema: dict[str, Any] = {
        "$schema": DRAFT_4,
        "title": name,
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
        "detail-type": {"type": "string", "enum": [detail_type]},
        "source": STRING if source is None else {"type": "string", "enum": [source]},
        "account": STRING,
        "time": {"type": "string", "format": "date-time"},
        "region": STRING,
        "resources": resources,
        "detail": {"$ref": f"#/definitions/{name}"},
    }
    schema["definitions"] = {name: detail, **definitions}
    return schema


def announcement(result: str) -> dict[str, Any]:
    """The schema of one announcement detail-type (``result`` as in ``DETAIL_TYPES``)."""
    detail_type = DETAIL_TYPES[result]
    finished = result != "processing_error"
    detail: dict[str, Any] = {
        "type": "object",
        "description": "Version 1. Fields are only ever added; a change of meaning bumps version.",
        "required": [
            "version",
            "job_id",
            "outcome",
            "event",
            "status",
            "error",
            "error_truncated",
            "processing_error",
            "artifacts",
            "artifact_count",
            "artifacts_truncated",
            "processed_at",
            "replay",
            *JOB_FIELDS,
        ],
        "properties": {
            "version": {"type": "integer", "enum": [1]},
            "job_id": {"type": "string", "minLength": 1, "description": "Dedupe on it."},
            "outcome": (
                {"type": "string", "enum": [result]}
                if finished
                else {
                    "type": ["string", "null"],
                    "enum": [*(r for r in PROCESSED if r != result), None],
                    "description": "Sume's outcome; null when the stored event was unreadable.",
                }
            ),
            "event": (
                {"type": "string", "enum": [f"job.{result}"]}
                if finished
                else {"type": ["string", "null"]}
            ),
            "status": STRING if finished else {"type": ["string", "null"]},
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
            "processing_error": (NULL if finished else {"$ref": "#/definitions/ProcessingError"}),
            "artifacts": {
                "type": "array",
                "description": "The first stored artifacts, in Sume's order.",
                "items": {"$ref": "#/definitions/Artifact"},
            },
            "artifact_count": {**COUNT, "description": "How many artifacts were stored."},
            "artifacts_truncated": {
                "type": "boolean",
                "description": "Some stored artifacts are left out of artifacts and resources.",
            },
            "processed_at": {"type": "string", "format": "date-time", "pattern": ISO_SECOND},
            "replay": {"type": "boolean", "description": "An operator replayed the job."},
            **JOB_FIELDS,
        },
    }
    definitions: dict[str, Any] = {"Artifact": ARTIFACT}
    if not finished:
        definitions["ProcessingError"] = PROCESSING_ERROR
    resources = {
        "type": "array",
        "description": "The S3 object ARN of each artifact in detail.artifacts, in order.",
        "items": {"type": "string", "pattern": S3_OBJECT_ARN},
    }
    return _event(
        detail_type,
        f"Announced once per job by sume-webhooks: {detail_type}.",
        detail,
        EVENT_SOURCE,
        resources,
        definitions,
    )


def lost() -> dict[str, Any]:
    """The schema of the announcement of a job the poller gave up."""
    detail_type = DETAIL_TYPES["lost"]
    detail: dict[str, Any] = {
        "type": "object",
        "description": "Version 1. Fields are only ever added; a change of meaning bumps version.",
        "required": [
            "version",
            "job_id",
            *JOB_FIELDS,
            "registered_at",
            "polls",
            "last_poll_error",
            "replay",
        ],
        "properties": {
            "version": {"type": "integer", "enum": [1]},
            "job_id": {"type": "string", "minLength": 1},
            **JOB_FIELDS,
            "lost_at": {"type": "string", "format": "date-time", "pattern": ISO_SECOND},
            "registered_at": {
                **ISO_SECOND_OR_NULL,
                "description": "When the job was registered for status polling.",
            },
            "polls": {**COUNT, "description": "Status polls made."},
            "last_poll_error": {
                "type": ["string", "null"],
                "description": "Why the last status poll got no answer (a code, e.g. "
                "refused_host, http_404); null if it got one.",
            },
            "replay": BOOLEAN,
        },
    }
    return _event(
        detail_type,
        f"Announced by sume-webhooks when no terminal answer came before a registered job's "
        f"cut-off: {detail_type}.",
        detail,
        EVENT_SOURCE,
        {"type": "array", "maxItems": 0},
        {},
    )


def registration_refused() -> dict[str, Any]:
    """The schema of the announcement of a refused registration event."""
    detail: dict[str, Any] = {
        "type": "object",
        "description": "Version 1. Fields are only ever added; a change of meaning bumps version.",
        "required": [
            "version",
            "reason",
            "message",
            "job_id",
            "registration_event_id",
            "refused_at",
        ],
        "properties": {
            "version": {"type": "integer", "enum": [1]},
            "reason": {"type": "string", "enum": list(REFUSAL_REASONS)},
            "message": {"type": "string", "description": "Why, for people."},
            "job_id": {
                "type": ["string", "null"],
                "description": "The job_id the event named, when it could be read.",
            },
            "registration_event_id": {
                "type": ["string", "null"],
                "description": "The id of the application's refused EventBridge event.",
            },
            "refused_at": {"type": "string", "format": "date-time", "pattern": ISO_SECOND},
        },
    }
    return _event(
        REGISTRATION_REFUSED_DETAIL_TYPE,
        "Announced by sume-webhooks when a registration event is refused for good (it is "
        "also in the registrations DLQ).",
        detail,
        EVENT_SOURCE,
        {"type": "array", "maxItems": 0},
        {},
    )


def registration() -> dict[str, Any]:
    """The schema of the event an application puts to register a submitted job."""
    detail = {
        "type": "object",
        "description": "What sume.polling.registry.expect takes; any other field is refused.",
        "required": ["job_id", "status_url"],
        "additionalProperties": False,
        "properties": {
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
    }
    return _event(
        REGISTRATION_DETAIL_TYPE,
        "Put by an application on the stack's bus, with a source of its own, to have "
        "sume-webhooks watch a job it submitted to Sume.",
        detail,
        None,
        {"type": "array", "items": STRING},
        {},
    )


def schemas() -> dict[str, dict[str, Any]]:
    """File name -> schema, one per detail-type on the bus."""
    built = {file_name(DETAIL_TYPES[result]): announcement(result) for result in PROCESSED}
    built[file_name(DETAIL_TYPES["lost"])] = lost()
    built[file_name(REGISTRATION_REFUSED_DETAIL_TYPE)] = registration_refused()
    built[file_name(REGISTRATION_DETAIL_TYPE)] = registration()
    return built


def text(schema: dict[str, Any]) -> str:
    return json.dumps(schema, indent=2) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m infra.schema_files", description=__doc__)
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
            path.parent.mkdir(exist_ok=True)
            path.write_text(wanted)
    extra = sorted({p.name for p in SCHEMAS_DIR.glob("*.json")} - set(schemas()))
    for name in stale:
        print(f"{'out of date' if args.check else 'written'}: schemas/{name}")
    for name in extra:
        print(f"not an event on the bus: schemas/{name}")
    return 1 if (args.check and stale) or extra else 0


if __name__ == "__main__":
    sys.exit(main())
