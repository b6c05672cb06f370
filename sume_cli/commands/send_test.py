"""``send-test``: signed deliveries to the webhook URL, with the deployment's secret."""

from __future__ import annotations

import argparse
import os

from infra.spec import OUTPUT_WEBHOOK_URL
from sume.core.names import Env
from sume.core.secrets import parse_secrets
from sume_cli import CHECK_FAILED, OK, USAGE, OpsError, rotation
from sume_cli.commands.secrets import secret_arn
from sume_cli.context import Ops
from sume_cli.output import as_json_output, dump, note, out
from sume_cli.sendtest import MAX_SHOWN_BODY, send


def _signing_secrets(ops: Ops, args: argparse.Namespace) -> list[bytes]:
    if args.secret:
        return [s.encode("utf-8") for s in args.secret]
    if value := os.environ.get(Env.SUME_COM_WEBHOOK_SIGNING_SECRET, "").strip():
        return list(parse_secrets(value))
    if not (ops.stage or ops.endpoint_url):
        raise OpsError(
            "no signing secret: pass --secret, set SUME_COM_WEBHOOK_SIGNING_SECRET, or name "
            "the deployment (--stage / --endpoint-url) to read it from Secrets Manager",
            USAGE,
        )
    arn = secret_arn(ops)
    return [s.encode("utf-8") for s in rotation.read(ops.client("secretsmanager"), arn)]


def cmd_send_test(ops: Ops, args: argparse.Namespace) -> int:
    url = args.url
    if not url:
        if not (ops.stage or ops.endpoint_url):
            raise OpsError(
                f"no URL: pass the webhook URL, or --stage to use its {OUTPUT_WEBHOOK_URL} "
                "(--endpoint-url: the local stack's)",
                USAGE,
            )
        url = ops.stack.webhook_url
        if not url:
            raise OpsError(
                f"{ops.stack.description} names no webhook URL ({OUTPUT_WEBHOOK_URL}): pass it"
            )
    answers = send(url, _signing_secrets(ops, args), args.job, args.event, args.artifact)
    shown = [(a, a.body[:MAX_SHOWN_BODY]) for a in answers]
    if as_json_output(args):
        dump([{"sent": a.label, "status": a.status, "body": body} for a, body in shown])
    else:
        for answer, body in shown:
            cut = "..." if len(answer.body) > len(body) else ""
            out(f"{answer.label} -> {answer.status} {body}{cut}".rstrip())
    failed = [a.label for a in answers if not a.ok]
    if failed:
        note(f"not accepted: {', '.join(failed)} (see the status and body above)")
        return CHECK_FAILED
    return OK
