"""A job's whole story from its one item, for people (text) and scripts (JSON)."""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from sume.store.job import Job, JobAttr, State
from sume_cli.dlq import spent_attempts
from sume_cli.invocation import Invocation
from sume_cli.times import iso

# Item attributes holding epoch seconds, shown as ISO 8601 UTC everywhere; any
# other ``*_at`` attribute (the worker and poller may add some) counts too.
TIME_ATTRIBUTES = frozenset({JobAttr.FIRST_SEEN, JobAttr.LEASE_UNTIL})


def is_time(attribute: str, value: Any) -> bool:
    return (attribute in TIME_ATTRIBUTES or attribute.endswith("_at")) and isinstance(
        value, int | float
    )


# What each state means to an operator at 3 a.m.
MEANING: dict[str, str] = {
    State.AWAITING: "registered; waiting for its webhook or the next status poll",
    State.RECEIVED: "terminal event stored; follow-up work owed",
    State.PROCESSING: "a worker holds the job under a lease",
    State.PROCESSED: "follow-up work done",
    State.PROCESSING_ERROR: "follow-up work ended in error: fix the cause, then `{replay}`",
    State.LOST: "status polling gave up before a terminal event arrived",
}


PARKED = (
    "parked: the worker could not bring it to an end and its message is in the DLQ; "
    "fix the cause, then `{redrive}`"
)


def lease_ended(job: Job, now: float) -> str | None:
    """What a processing job whose lease has run out is waiting for, if it has."""
    if job.state != State.PROCESSING or job.lease_until is None or job.lease_until >= now:
        return None
    # A worker that failed gives its claim back at once and notes why
    # (last_error_at); a claim taken after that note was abandoned instead.
    if job.last_error is not None and (job.last_error_at or 0) >= (job.claimed_at or 0):
        return "released, waiting for a retry"
    return "lease expired: its worker stopped; the sweeper queues it again"


def _with_iso_times(record: dict[str, Any]) -> dict[str, Any]:
    return {k: iso(v) if is_time(k, v) else v for k, v in record.items()}


def as_json(job: Job) -> dict[str, Any]:
    """The item with its times (also inside artifact records) in ISO UTC; the rest as stored.

    Only the item's own attributes and the worker's artifact records are read as
    times: ``metadata`` is the application's, and its ``paid_at`` stays its number.
    """
    item = _with_iso_times(dict(sorted(job.as_item().items())))
    if isinstance(artifacts := item.get(JobAttr.ARTIFACTS), list):
        item[JobAttr.ARTIFACTS] = [
            _with_iso_times(a) if isinstance(a, dict) else a for a in artifacts
        ]
    return item


def exact_json(value: Any, default: Callable[[Any], Any] | None = None, **options: Any) -> str:
    """``json.dumps(value, **options)``, each Decimal written as the JSON number it is.

    The jobs table hands fractions back as Decimals (metadata keeps every
    digit): a float would round them and ``default=str`` would quote them.
    json cannot write a number's own text, so each one goes in as a marker
    no stored string can be (it holds a fresh random token), and the quoted
    marker is then replaced by the digits.
    """
    marker = f"decimal-{uuid.uuid4().hex}-"
    numbers: list[str] = []

    def written(item: Any) -> Any:
        if isinstance(item, Decimal) and item.is_finite():
            numbers.append(str(item))
            return f"{marker}{len(numbers) - 1}"
        if default is None:
            raise TypeError(f"{type(item).__name__} is not JSON serializable")
        return default(item)

    text = json.dumps(value, default=written, **options)
    return re.sub(f'"{marker}([0-9]+)"', lambda found: numbers[int(found[1])], text)


def _compact(value: Any) -> str:
    if isinstance(value, str):
        return value
    return exact_json(value, sort_keys=True, ensure_ascii=False)


def _artifact(value: Any) -> str:
    if isinstance(value, dict) and "uri" in value:
        parts = [str(value["uri"])]
        if "size" in value:
            parts.append(f"{value['size']} bytes")
        if "source_url" in value:
            parts.append(f"from {value['source_url']}")
        if "stored_at" in value:
            parts.append(f"stored {iso(value['stored_at'])}")
        return "  ".join(parts)
    if isinstance(value, dict):
        return "  ".join(f"{k}={_compact(v)}" for k, v in sorted(value.items()))
    return _compact(value)


DROPPED = "not recorded: DynamoDB refused the finish (the announcement has them)"


def _listed(job: Job) -> str | None:
    """How many artifacts the item lists, when it could not list them all."""
    if not job.artifacts_truncated:
        return None
    listed = len(job.artifacts or [])
    return f"{job.artifact_count} stored; the item lists the first {listed}"


def _sume_error(job: Job) -> Any:
    """Sume's error as the worker keeps it: JSON text, cut when ``error_truncated``.

    Shown as stored (ASCII, with escapes), so even a lone surrogate prints;
    items finished before the text form hold a map.
    """
    if isinstance(job.error, str) and job.error_truncated:
        return f"{job.error}... (cut at {len(job.error)} characters)"
    return job.error


def _reported(job: Job) -> str | None:
    """Where the job is in the report index (``sume-webhooks report``), once it ended."""
    if job.report_at is None:
        return None
    return f"entered {iso(job.report_at)}  bucket={job.report_bucket or '-'}"


def _claim(job: Job) -> str:
    """The claim, its times in order: a lease given back shows when, not its expiry."""
    given_back = job.last_error_at is not None and job.last_error_at >= (job.claimed_at or 0)
    if given_back and (job.lease_until or 0) < (job.last_error_at or 0):
        lease = f"released {iso(job.last_error_at)}"
    else:
        lease = f"lease until {iso(job.lease_until) or '-'}"
    return f"claimed {iso(job.claimed_at)}  {lease}  attempts={spent_attempts(job)}"


def _runs(job: Job) -> str:
    """The window replays that replayed the job (``replay --since``), after its replay count."""
    return f"  runs {', '.join(job.replay_runs)}" if job.replay_runs else ""


def _meaning(job: Job, cli: Invocation | None) -> str:
    """What the job's state means, its commands (``{replay}``, ``{redrive}``) filled in."""
    commands = {
        "replay": (cli or Invocation()).line("replay", job.job_id),
        "redrive": (cli or Invocation()).line("dlq", "redrive"),
    }
    if job.parked_at is not None:
        return PARKED.format(**commands)
    if (ended := lease_ended(job, time.time())) is not None:
        return ended
    return MEANING.get(job.state or "?", "unknown state").format(**commands)


def render(job: Job, cli: Invocation | None = None) -> str:
    """The job as labelled lines, most telling first; absent attributes are skipped.

    ``cli``: how the commands it names start (``Ops.invocation``).

    Attributes this view does not know yet (``Job.other``) are listed last,
    under their own names, so the story is never silently incomplete. The
    claim id is an internal token: only whether there is a claim is shown.
    """
    state = job.state or "?"
    lines: list[tuple[str, str]] = [
        ("job", job.job_id),
        ("state", f"{state} ({_meaning(job, cli)})"),
    ]

    def add(label: str, value: Any) -> None:
        if value not in (None, "", [], {}):
            lines.append((label, value if isinstance(value, str) else _compact(value)))

    if job.replay:
        add("replay", "requested: artifacts will be copied again")
    if job.replays is not None:
        add("replays", f"{job.replays}  last {iso(job.replayed_at) or '-'}{_runs(job)}")
    add("replay reason", job.replay_reason)
    add("parked", iso(job.parked_at))
    add("source", job.source)
    if job.event:
        add("event", f"{job.event}  status={job.status or ''}")
    if job.deliveries is not None:
        add("deliveries", f"{job.deliveries}  conflicts={job.conflicts or 0}")
    add("first seen", iso(job.first_seen))
    add("last delivery", iso(job.last_delivery_at))
    add("received", iso(job.received_at))
    add("outcome", job.outcome)
    add("error", _sume_error(job))
    add("details", DROPPED if job.details_dropped else None)
    add("processing error", job.processing_error)
    if job.last_error is not None:
        add("last error", f"{iso(job.last_error_at) or '-'}  {_compact(job.last_error)}")
    add("processed", iso(job.processed_at))
    add("artifacts", _listed(job))
    for artifact in job.artifacts or []:
        add("artifact", _artifact(artifact))
    if job.due_at is not None:
        add("due", f"{iso(job.due_at)}  shard={job.due_shard}")
    if job.claim_id is not None:
        add("claim", _claim(job))
    if job.sweeps is not None:
        add("sweeps", str(job.sweeps))
    add("status url", job.status_url)
    add("metadata", job.metadata)
    add("registered", iso(job.registered_at))
    if job.poll_attempts is not None:
        add("polls", f"{job.poll_attempts}  last {iso(job.last_polled_at) or 'never'}")
    add("last poll error", job.last_poll_error)
    add("lost", iso(job.lost_at))
    add("in report", _reported(job))
    add("expires", iso(job.expires_at))
    if job.body is not None:
        add("body", f"{len(job.body.encode('utf-8'))} bytes inline (--json shows it)")
    add("body ref", job.body_ref)
    for attribute, value in sorted(job.other.items()):
        add(attribute, iso(value) if is_time(attribute, value) else value)
    width = max(len(label) for label, _ in lines)
    return "\n".join(f"{label:<{width}}  {value}" for label, value in lines)
