"""Rotating the signing secret on our side, guided by the receiver's own metric.

The secret's value is a JSON list, newest first (``sume.core.secrets`` accepts a
plain string or a list). The receiver tries every listed secret and counts
which position matched in ``SignatureSecret<N>``, so an old secret can be
retired once its position stops matching. Secrets are never printed, only a
short fingerprint to tell them apart.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sume.core.names import METRICS_NAMESPACE, SERVICE_NAME, Metric
from sume.core.secrets import parse_secrets
from sume_cli import USAGE, OpsError


def fingerprint(secret: str) -> str:
    return "sha256:" + hashlib.sha256(secret.encode("utf-8")).hexdigest()[:12]


def read(sm: Any, secret_id: str) -> list[str]:
    value = sm.get_secret_value(SecretId=secret_id).get("SecretString")
    return [s.decode("utf-8") for s in parse_secrets(value)]


def _write(sm: Any, secret_id: str, secrets: list[str]) -> None:
    sm.put_secret_value(SecretId=secret_id, SecretString=json.dumps(secrets))


def rotate(sm: Any, secret_id: str, new_secret: str) -> list[str]:
    """Put ``new_secret`` first, keeping every current one; returns the new list."""
    new = new_secret.strip()
    if not new:
        raise OpsError("refusing to add an empty signing secret", USAGE)
    current = read(sm, secret_id)
    if new in current:
        raise OpsError(f"that secret is already active at position {current.index(new)}")
    updated = [new, *current]
    _write(sm, secret_id, updated)
    return updated


def retire(sm: Any, secret_id: str, position: int | None) -> tuple[str, list[str]]:
    """Remove one secret (the oldest, last, by default); never the last one left."""
    current = read(sm, secret_id)
    if len(current) < 2:
        raise OpsError("refusing to retire the last signing secret: rotate a new one in first")
    index = len(current) - 1 if position is None else position
    if not 0 <= index < len(current):
        raise OpsError(f"no secret at position {index} (positions 0..{len(current) - 1})", USAGE)
    retired = current.pop(index)
    _write(sm, secret_id, current)
    return retired, current


@dataclass(frozen=True)
class Usage:
    position: int
    fingerprint: str
    matches: float | None
    """Deliveries verified by this position in the window; None if no datapoint."""


def usage(cloudwatch: Any, secrets: list[str], start: datetime, end: datetime) -> list[Usage]:
    """How many deliveries each position verified between ``start`` and ``end``."""
    period = max(60, int((end - start).total_seconds()) // 60 * 60)
    result = []
    for position, secret in enumerate(secrets):
        points = cloudwatch.get_metric_statistics(
            Namespace=METRICS_NAMESPACE,
            MetricName=Metric.signature_secret(position),
            Dimensions=[{"Name": "service", "Value": SERVICE_NAME}],
            StartTime=start,
            EndTime=end,
            Period=period,
            Statistics=["Sum"],
        ).get("Datapoints", [])
        total = sum(p.get("Sum", 0) for p in points) if points else None
        result.append(Usage(position, fingerprint(secret), total))
    return result


def metric_hint(position: int, status_command: str) -> str:
    """How to see, before retiring, whether Sume still signs with ``position``."""
    return (
        f"Before retiring position {position}, its metric {Metric.signature_secret(position)} "
        f"(namespace {METRICS_NAMESPACE}, dimension service={SERVICE_NAME}) must stay at 0 "
        f"for a while after Sume switched secrets:\n"
        f"  {status_command}\n"
        f"  aws cloudwatch get-metric-statistics --namespace {METRICS_NAMESPACE} "
        f"--metric-name {Metric.signature_secret(position)} "
        f"--dimensions Name=service,Value={SERVICE_NAME} --statistics Sum --period 3600 "
        f"--start-time {_hours_ago(24)} --end-time {_hours_ago(0)}\n"
        f"Receivers cache the secret for up to SECRET_CACHE_SECONDS (300 s) after a change."
    )


def _hours_ago(hours: int) -> str:
    moment = datetime.now(UTC).timestamp() - hours * 3600
    return datetime.fromtimestamp(moment, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
