"""``python -m devstack.simulator``: the simulator's command line (``--help`` says how to use it).

Kept apart from the simulator so that ``devstack.simulator.scenario``, which plays Sume
through the simulator, and the ``scenario`` command, which runs it, do not
import each other.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import textwrap
import time
import uuid
from typing import Any

from devstack.simulator import (
    ERRORS,
    MAX_ATTEMPTS,
    SPACING_SECONDS,
    TIMEOUT_SECONDS,
    Attempt,
    Sume,
    pause,
    scenario,
)
from sume.core.names import Env

INTERRUPTED = 130
DESCRIPTION = textwrap.fill(
    "Plays Sume by its contract: every attempt signed afresh (sume-v1), up to "
    f"{MAX_ATTEMPTS} attempts at a fixed spacing, a {TIMEOUT_SECONDS:g} s timeout, any "
    "non-2xx retried, a 2xx stops. It serves the jobs' status_url and artifact links "
    "on loopback."
)
EPILOG = f"""exit status:
  0    a delivery was acknowledged (2xx)
  1    Sume gave up: every attempt refused or unanswered (also: no secret to sign with)
  2    usage: bad arguments
  {INTERRUPTED}  stopped with Ctrl-C (nothing more is sent)

The signing secret and the URL of a local stack are in the banner `make run` prints."""
# Answers in a row after which a wrong secret, not a glitch, is the likely cause.
MISMATCH_RUN = 3
# The receiver's answer when no secret it holds made the signature.
MISMATCH = {"error": "signature_mismatch"}
MISMATCH_HINT = (
    "{count} x 401 signature_mismatch in a row: the receiver holds another secret. "
    "Sign with the one its `make run` banner prints (line 'signing secret'), "
    "or for a deployed stage the one in the secret named by SigningSecretArn"
)


def print_attempt(attempt: Attempt, next_in: float | None) -> None:
    """One line per attempt, as it happens, saying when the next one goes."""
    a = attempt
    what = f"{a.status} {json.dumps(a.answer)}" if a.reached else f"no answer ({a.error})"
    line = f"attempt {a.number}: {what}{' (answer dropped)' if a.dropped else ''}"
    if next_in is not None:
        at = time.strftime("%H:%M:%S", time.localtime(time.time() + next_in))
        line += f"; next in {next_in:g} s (at {at}); Ctrl-C stops"
    print(line, flush=True)


class AttemptPrinter:
    """``print_attempt``, and once, after a run of signature mismatches (or when the
    delivery ends on one), which secret to sign with."""

    def __init__(self) -> None:
        self._mismatches = 0
        self._hinted = False

    def __call__(self, attempt: Attempt, next_in: float | None) -> None:
        print_attempt(attempt, next_in)
        mismatch = attempt.status == 401 and attempt.answer == MISMATCH
        self._mismatches = self._mismatches + 1 if mismatch else 0
        run_long = self._mismatches >= MISMATCH_RUN
        if not self._hinted and self._mismatches and (run_long or next_in is None):
            self._hinted = True
            print(MISMATCH_HINT.format(count=self._mismatches), flush=True)


def _secrets(args: argparse.Namespace) -> list[str]:
    if args.local_stack:
        return local_stack_secrets(args.local_stack)
    chosen = args.secret or [os.environ.get(Env.SUME_COM_WEBHOOK_SIGNING_SECRET, "")]
    if not all(chosen):
        raise SystemExit(
            "give --secret (twice while rotating), --local-stack or SUME_COM_WEBHOOK_SIGNING_SECRET"
        )
    return chosen


def local_stack_secrets(endpoint: str) -> list[str]:
    """The signing secret(s) a local stack keeps in its moto at ``endpoint``, as its
    receiver reads them: what a reader of the banner would otherwise copy by hand."""
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError

    from devstack.resources import signing_secret_name
    from devstack.settings import FAKE_CREDENTIALS, REGION
    from sume.core.errors import ConfigurationError
    from sume.core.secrets import parse_secrets

    name = signing_secret_name()
    client = boto3.session.Session(
        aws_access_key_id=FAKE_CREDENTIALS["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=FAKE_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        region_name=REGION,
    ).client("secretsmanager", endpoint_url=endpoint)
    try:
        value = client.get_secret_value(SecretId=name)["SecretString"]
        return [s.decode() for s in parse_secrets(value)]
    except (BotoCoreError, ClientError, ConfigurationError) as exc:
        raise SystemExit(
            f"cannot read the local stack's signing secret {name} at {endpoint}: {exc} "
            "(is `make run` going, with this moto endpoint in its banner?)"
        ) from None


def _sume(args: argparse.Namespace, **options: Any) -> Sume:
    """The simulator with the options both commands take."""
    return Sume(
        args.url,
        _secrets(args),
        spacing_seconds=args.spacing,
        timeout_seconds=args.timeout,
        **options,
    )


def _send(args: argparse.Namespace) -> int:
    with _sume(args, attempts=args.attempts, on_attempt=AttemptPrinter()) as sume:
        if args.event == "webhook.test":
            delivery = sume.ping()
        else:
            body: dict[str, Any] = {
                "event": args.event,
                "job_id": args.job_id or f"job_{uuid.uuid4().hex[:16]}",
                "status": "OK" if args.event == "job.completed" else "ERROR",
            }
            if args.event == "job.completed":
                body["payload"] = {"artifacts": args.artifact}
            else:
                body["error"] = ERRORS.get(args.event)
            print(f"job_id {body['job_id']}", flush=True)
            delivery = sume.send(json.dumps(body).encode(), body["job_id"])
    print("delivered" if delivery.delivered else "NOT delivered: Sume gives up")
    return 0 if delivery.delivered else 1


def _scenario(args: argparse.Namespace) -> int:
    expect = None
    if args.table:
        from infra.spec import LOCAL_URLS
        from sume.core.names import DUE_SHARDS, Env
        from sume.net.policy import UrlPolicy
        from sume.polling.compose import build_registry
        from sume.polling.settings import RegistrySettings

        # First poll soon, as the local stack's short timings would have it;
        # its status URLs as the local poller takes them.
        local = UrlPolicy.from_env(LOCAL_URLS, Env.STATUS_ALLOWED_HOSTS)
        registry = build_registry(RegistrySettings(args.table, DUE_SHARDS, args.first_poll, local))

        def expect(job_id: str, status_url: str) -> None:
            registry.expect(job_id, status_url)

    with _sume(args, api_token=args.api_token) as sume:
        run = scenario.drive(sume, expect, redeliver_after=lambda _job: pause(args.spacing * 10))
        # Keep serving status and artifacts while the stack catches up.
        for line in scenario.delivery_lines(run):
            print(line)
        print(f"serving status_url and artifacts for {args.linger:g}s more...", flush=True)
        pause(args.linger)
    return 0 if run.as_expected() else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m devstack.simulator",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True)

    def common(p: argparse.ArgumentParser, spacing: float) -> None:
        signing = p.add_mutually_exclusive_group()
        signing.add_argument(
            "--secret",
            action="append",
            help="signing secret; give it twice to sign with two (rotation). "
            "Default: $SUME_COM_WEBHOOK_SIGNING_SECRET",
        )
        signing.add_argument(
            "--local-stack",
            metavar="MOTO_ENDPOINT",
            help="sign with the secret the local stack keeps at this moto endpoint "
            "(`make run`: http://127.0.0.1:5000)",
        )
        p.add_argument("--spacing", type=float, default=spacing, help="seconds between attempts")
        p.add_argument("--timeout", type=float, default=TIMEOUT_SECONDS, help="per attempt")

    send = sub.add_parser(
        "send",
        help="send one signed event to any URL, with Sume's retries",
        description=textwrap.fill(
            "Send one signed event to URL (any receiver, local or deployed), with "
            "Sume's retries; each attempt is printed as it is answered."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    send.add_argument("url", help="the webhook URL")
    send.add_argument(
        "--event",
        default="job.completed",
        choices=["job.completed", "job.failed", "job.canceled", "webhook.test"],
        help="the event to send (default job.completed)",
    )
    send.add_argument("--job-id", help="default: a fresh job_<16 hex digits>")
    send.add_argument("--artifact", action="append", default=[], help="artifact URL (repeat)")
    send.add_argument(
        "--attempts", type=int, default=MAX_ATTEMPTS, help=f"at most (default {MAX_ATTEMPTS})"
    )
    common(send, SPACING_SECONDS)
    send.set_defaults(run=_send)

    run = sub.add_parser(
        "scenario",
        help="every delivery path against a receiver (e.g. one `make run` serves)",
        description=textwrap.fill(
            "Play make demo's scenario against a running receiver, serving the "
            "status_url and artifacts on loopback while the stack catches up."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run.add_argument("url", nargs="?", default="http://127.0.0.1:8080/webhooks/sume")
    run.add_argument(
        "--table",
        help="jobs table, to register the job whose webhooks never arrive "
        "(uses AWS_ENDPOINT_URL; `make run` prints both). Without it that job is skipped.",
    )
    run.add_argument(
        "--first-poll", type=int, default=2, help="seconds before the registered job's first poll"
    )
    run.add_argument(
        "--api-token", help="bearer token the status_url demands (`make run` prints it)"
    )
    run.add_argument("--linger", type=float, default=15.0, help="keep serving after the deliveries")
    common(run, 0.5)
    run.set_defaults(run=_scenario)

    args = parser.parse_args(argv)
    try:
        return int(args.run(args))
    except KeyboardInterrupt:
        print("stopped (Ctrl-C): nothing more is sent", file=sys.stderr)
        return INTERRUPTED
