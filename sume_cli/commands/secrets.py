"""``secrets rotate``, ``retire`` and ``status``: the signing secret's positions."""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime, timedelta
from typing import Any

from sume.core.names import Metric
from sume_cli import OK, OpsError, rotation
from sume_cli.context import Ops
from sume_cli.output import as_json_output, dump, note, out, table


def secret_arn(ops: Ops) -> str:
    arn = ops.stack.names.signing_secret_arn
    if not arn:
        raise OpsError(
            f"{ops.stack.description} keeps no signing secret in Secrets Manager "
            "(its receiver reads SUME_COM_WEBHOOK_SIGNING_SECRET)"
        )
    return arn


def _positions(secrets: list[str], new: str | None = None) -> list[dict[str, Any]]:
    return [
        {"position": position, "fingerprint": rotation.fingerprint(secret), "new": secret == new}
        for position, secret in enumerate(secrets)
    ]


def _show_positions(positions: list[dict[str, Any]]) -> None:
    for p in positions:
        out(f"  {p['position']}  {p['fingerprint']}{'  (new)' if p['new'] else ''}")


STDIN = "-"


def cmd_secrets_rotate(ops: Ops, args: argparse.Namespace) -> int:
    # "-" keeps the secret out of the shell history and the process list.
    new = sys.stdin.readline() if args.new_secret == STDIN else args.new_secret
    arn = secret_arn(ops)
    secrets = rotation.rotate(ops.client("secretsmanager"), arn, new)
    positions = _positions(secrets, new.strip())
    next_steps = [
        "Give Sume the new secret; the receiver accepts both meanwhile.",
        rotation.metric_hint(len(secrets) - 1, ops.line("secrets", "status", "--hours", "24")),
        f"Then: {ops.line('secrets', 'retire')}",
    ]
    if as_json_output(args):
        dump({"secret_arn": arn, "secrets": positions})
        for line in next_steps:
            note(line)
    else:
        out(f"{arn} now holds {len(secrets)} secrets, newest first:")
        _show_positions(positions)
        for line in next_steps:
            out(line)
    return OK


def cmd_secrets_retire(ops: Ops, args: argparse.Namespace) -> int:
    arn = secret_arn(ops)
    retired, remaining = rotation.retire(ops.client("secretsmanager"), arn, args.position)
    positions = _positions(remaining)
    if as_json_output(args):
        dump({"secret_arn": arn, "retired": rotation.fingerprint(retired), "secrets": positions})
    else:
        out(f"retired {rotation.fingerprint(retired)}; {arn} now holds:")
        _show_positions(positions)
    return OK


def cmd_secrets_status(ops: Ops, args: argparse.Namespace) -> int:
    arn = secret_arn(ops)
    secrets = rotation.read(ops.client("secretsmanager"), arn)
    now = datetime.now(UTC)
    # The end reaches into the next minute, so the current minute's deliveries count.
    start, end = now - timedelta(hours=args.hours), now + timedelta(minutes=1)
    usage = rotation.usage(ops.client("cloudwatch"), secrets, start, end)
    if as_json_output(args):
        positions = [
            {
                "position": u.position,
                "fingerprint": u.fingerprint,
                "metric": Metric.signature_secret(u.position),
                "matches": u.matches,
            }
            for u in usage
        ]
        dump({"secret_arn": arn, "hours": args.hours, "positions": positions})
        return OK
    out(f"{arn}: deliveries verified per position in the last {args.hours} h")
    table(
        [
            [
                str(u.position),
                u.fingerprint,
                Metric.signature_secret(u.position),
                "no data" if u.matches is None else f"{u.matches:g}",
            ]
            for u in usage
        ],
        ["POSITION", "FINGERPRINT", "METRIC", "MATCHES"],
    )
    return OK
