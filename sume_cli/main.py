"""``sume-webhooks``: the operator's CLI, against a deployed stage or the local stack.

A thin layer: argparse naming the commands (``sume_cli.commands``, one small
function each over ``sume_cli``), and one place (``main``) that turns expected
failures into a one-line message on stderr and an exit code. See docs/cli.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from collections.abc import Callable, Sequence
from importlib.metadata import version as package_version
from typing import Any

import boto3
import botocore
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    EndpointConnectionError,
    NoCredentialsError,
    NoRegionError,
    ProfileNotFound,
)

from infra.spec import DEFAULT_POLL_RATE_MINUTES, OUTPUT_WEBHOOK_URL
from sume.contract.envelope import TERMINAL_EVENTS
from sume.core.errors import ConfigurationError
from sume.core.ids import InvalidJobId, check_job_id
from sume.core.names import DUE_SHARDS
from sume.core.runtime import Clock
from sume_cli import FAILED, USAGE, OpsError, owed
from sume_cli.commands import PROG, Command, announcements
from sume_cli.commands.dlq import cmd_dlq_peek, cmd_dlq_redrive
from sume_cli.commands.jobs import cmd_expect, cmd_list, cmd_status
from sume_cli.commands.pause import cmd_pause, cmd_resume
from sume_cli.commands.replay import add_replay_arguments, cmd_replay_any
from sume_cli.commands.report import cmd_announce_owed, cmd_report
from sume_cli.commands.secrets import cmd_secrets_retire, cmd_secrets_rotate, cmd_secrets_status
from sume_cli.commands.send_test import cmd_send_test
from sume_cli.commands.tail import add_tail_arguments, cmd_tail
from sume_cli.context import LOCAL_ENDPOINT_HINT, Ops, not_an_aws_api
from sume_cli.invocation import Invocation, deployment, program
from sume_cli.listing import DEFAULT_STATE, STATES
from sume_cli.output import JSON, TABLE, note
from sume_cli.pause import WORKS
from sume_cli.stackinfo import LOCAL_PREFIX, DiscoveryError

# A job still due this long after its due time is overdue: the poller, on its
# default schedule, has let two runs pass without acting on it.
DEFAULT_OVERDUE_AFTER = f"{2 * DEFAULT_POLL_RATE_MINUTES}m"


def version() -> str:
    return (
        f"{PROG} {package_version('sume-webhooks')} Python/{platform.python_version()} "
        f"boto3/{boto3.__version__} botocore/{botocore.__version__}"
    )


def _global_options(parser: argparse.ArgumentParser, default: Any) -> None:
    """Accepted before or after the command (the command's copy must not reset them)."""
    group = parser.add_argument_group("deployment and output")
    group.add_argument(
        "--stage", default=default, help="deployed stage: resources from its stack outputs"
    )
    group.add_argument(
        "--endpoint-url",
        default=default,
        help="the local stack's moto endpoint, e.g. http://127.0.0.1:5000 "
        "(default: AWS_ENDPOINT_URL, unless --stage)",
    )
    group.add_argument(
        "--profile", default=default, help="AWS profile (default: AWS_PROFILE, else default)"
    )
    group.add_argument(
        "--region", default=default, help="AWS region (default: AWS_REGION, else AWS config)"
    )
    group.add_argument(
        "--output",
        choices=(TABLE, JSON),
        default=default if default is argparse.SUPPRESS else TABLE,
        help="table (for people, the default) or json (for scripts)",
    )
    group.add_argument(
        "--prefix",
        default=default,
        help=f"name prefix of the local stack's resources (default {LOCAL_PREFIX})",
    )
    group.add_argument(
        "--shards",
        type=int,
        default=default,
        help="shards of the due-work index (default: the stack's: its poller's DUE_SHARDS, "
        f"the local stack's own; else DUE_SHARDS, else {DUE_SHARDS})",
    )


def json_alias(parser: argparse.ArgumentParser, help_text: str = "same as --output json") -> None:
    parser.add_argument(
        "--json",
        dest="output",
        action="store_const",
        const=JSON,
        default=argparse.SUPPRESS,
        help=help_text,
    )


def _report_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--since", default="24h", help="30m, 2h, 7d, or an ISO time (UTC); default 24h"
    )
    parser.add_argument(
        "--limit", type=int, default=10, help="job ids listed per kind (10); the rest are counted"
    )
    parser.add_argument(
        "--overdue-after",
        default=DEFAULT_OVERDUE_AFTER,
        metavar="DURATION",
        help=f"a job still due this long past its due time is overdue ({DEFAULT_OVERDUE_AFTER})",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="exit 3 when a job in the window is lost, in processing_error, parked or overdue",
    )


def _work_commands(commands: Any, command: Callable[..., argparse.ArgumentParser]) -> None:
    for name, run_, help_text in (
        ("pause", cmd_pause, "stop the worker or the poller; deliveries are still stored"),
        ("resume", cmd_resume, "start paused work again; the backlog drains as usual"),
    ):
        work = command(commands, name, run_, help_text)
        work.add_argument("work", choices=WORKS, metavar="WORK", help=" or ".join(WORKS))
        if name == "pause":
            work.add_argument(
                "--reason", required=True, metavar="TEXT", help="why: shown until it resumes"
            )
        json_alias(work)


def _secrets_commands(commands: Any, command: Callable[..., argparse.ArgumentParser]) -> None:
    secrets_parser = command(commands, "secrets", None, "rotate the signing secret")
    secrets_commands = secrets_parser.add_subparsers(
        dest="secrets_command", required=True, metavar="ACTION"
    )
    rotate = command(
        secrets_commands, "rotate", cmd_secrets_rotate, "add a new secret before the current one"
    )
    rotate.add_argument(
        "--new-secret", required=True, metavar="VALUE", help="the new secret, or - for stdin"
    )
    retire = command(
        secrets_commands, "retire", cmd_secrets_retire, "remove an old secret (never the last)"
    )
    retire.add_argument("--position", type=int, help="which one (default: the oldest, last)")
    command(
        secrets_commands, "status", cmd_secrets_status, "deliveries each secret verified"
    ).add_argument("--hours", type=int, default=24, help="window, in hours (24)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Operate the Sume webhook receiver: jobs, pausing the work, DLQ, "
        "test deliveries, secrets.",
        epilog="Exit codes: 0 ok, 1 failed, 2 usage, 3 send-test not accepted by the endpoint "
        "or report --check found lost, processing_error, parked or overdue jobs, or paused "
        "work, or a replay --since had a replay refused or matched no job, or an "
        "announcements replay failed; 130 interrupted.",
    )
    _global_options(parser, None)
    parser.add_argument("--version", action="version", version=version())
    common = argparse.ArgumentParser(add_help=False)
    _global_options(common, argparse.SUPPRESS)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(
        group: Any, name: str, run: Command | None, help_text: str
    ) -> argparse.ArgumentParser:
        sub: argparse.ArgumentParser = group.add_parser(
            name, parents=[common], help=help_text, description=help_text
        )
        if run:
            sub.set_defaults(run=run)
        return sub

    status = command(commands, "status", cmd_status, "a job's whole story from its item")
    status.add_argument("job_id", metavar="JOB_ID")
    json_alias(status, "the item as JSON (times in ISO UTC)")

    listing = command(commands, "list", cmd_list, "jobs in a state (default: unfinished ones)")
    listing.add_argument(
        "--state",
        choices=STATES,
        help=f"default {DEFAULT_STATE}: awaiting and owed jobs, all the due-work index holds",
    )
    listing.add_argument("--since", help="30m, 2h, 7d, or an ISO time (UTC)")
    listing.add_argument("--limit", type=int, default=50, help="at most this many jobs (50)")
    listing.add_argument(
        "--scan",
        action="store_true",
        help="allow a bounded Scan for states in no index (processed, failed, lost, ...)",
    )
    listing.add_argument(
        "--scan-budget", type=int, default=1000, help="items a Scan may read (1000)"
    )
    json_alias(listing)

    _report_options(
        command(
            commands, "report", cmd_report, "how every job since a time ended: counts and job ids"
        )
    )
    owed.add_options(
        command(commands, "announce-owed", cmd_announce_owed, "announce lost jobs never announced")
    )

    expect = command(commands, "expect", cmd_expect, "register a submitted job for status polling")
    expect.add_argument("job_id", metavar="JOB_ID")
    expect.add_argument("status_url", metavar="STATUS_URL")
    expect.add_argument(
        "--metadata", action="append", default=[], metavar="KEY=VALUE", help="repeatable"
    )

    replay = command(
        commands,
        "replay",
        cmd_replay_any,
        "redo a finished job's follow-up work (re-copy artifacts), or a window's by filter",
    )
    add_replay_arguments(replay)

    _work_commands(commands, command)

    json_alias(
        add_tail_arguments(
            command(commands, "tail", cmd_tail, "follow the job events live, one line each")
        ),
        "same as --output json: one JSON object a line",
    )

    dlq_parser = command(commands, "dlq", None, "the dead-letter queues (jobs, registrations)")
    dlq_commands = dlq_parser.add_subparsers(dest="dlq_command", required=True, metavar="ACTION")
    peek = command(
        dlq_commands,
        "peek",
        cmd_dlq_peek,
        "show DLQ messages and why each is there (SQS counts each peek as a receive)",
    )
    peek.add_argument("--limit", type=int, default=10, help="at most this many messages (10)")
    json_alias(peek)
    redrive = command(
        dlq_commands, "redrive", cmd_dlq_redrive, "move DLQ messages back to their queue"
    )
    redrive.add_argument("--limit", type=int, default=100, help="at most this many messages (100)")
    for action in (peek, redrive):
        action.add_argument(
            "--registrations",
            action="store_true",
            help="the registrations DLQ (refused or failed registration events), not the jobs DLQ",
        )

    send_test = command(
        commands, "send-test", cmd_send_test, "send a signed webhook.test (and a job event)"
    )
    send_test.add_argument(
        "url",
        nargs="?",
        metavar="URL",
        help=f"webhook URL (default: the stage's {OUTPUT_WEBHOOK_URL})",
    )
    send_test.add_argument(
        "--secret",
        action="append",
        help="signing secret, repeatable (default: SUME_COM_WEBHOOK_SIGNING_SECRET, "
        "else the deployment's secret in Secrets Manager)",
    )
    send_test.add_argument("--job", metavar="JOB_ID", help="also send a terminal event for it")
    send_test.add_argument("--event", choices=list(TERMINAL_EVENTS), default="job.completed")
    send_test.add_argument(
        "--artifact", action="append", default=[], metavar="URL", help="for job.completed"
    )

    announcements.add_commands(commands, command)

    _secrets_commands(commands, command)
    return parser


def _aws_error(exc: ClientError) -> str:
    error = exc.response.get("Error", {})
    return f"AWS refused {exc.operation_name}: {error.get('Code')}: {error.get('Message')}"


def run(args: argparse.Namespace, clock: Clock = time.time) -> int:
    if args.stage and args.endpoint_url:
        raise OpsError("pass either --stage or --endpoint-url, not both", USAGE)
    # As the AWS CLI: AWS_ENDPOINT_URL names where the calls go. Without a
    # --stage that is the local stack; with one, the stack is found through
    # CloudFormation at that endpoint (boto3 honours the variable itself).
    endpoint = args.endpoint_url
    if not args.stage and not endpoint:
        endpoint = os.environ.get("AWS_ENDPOINT_URL", "").strip() or None
    if (job_id := getattr(args, "job_id", None)) is not None:
        try:
            check_job_id(job_id)
        except InvalidJobId as exc:
            raise OpsError(f"JOB_ID: {exc}", USAGE) from None
    ops = Ops(
        stage=args.stage,
        endpoint_url=endpoint,
        # AWS_REGION: the AWS CLI and SDKs read it; botocore only AWS_DEFAULT_REGION.
        region=args.region or os.environ.get("AWS_REGION", "").strip() or None,
        prefix=args.prefix or LOCAL_PREFIX,
        shards=args.shards,
        profile=args.profile,
        invocation=Invocation(program(sys.argv[0]), deployment(vars(args))),
        clock=clock,
    )
    command: Command = args.run
    try:
        return command(ops, args)
    except ClientError as exc:
        if (mistake := not_an_aws_api(exc, ops.endpoint_url)) is not None:
            raise mistake from None
        raise
    except EndpointConnectionError as exc:
        if ops.endpoint_url:
            raise OpsError(
                f"cannot reach {exc.kwargs.get('endpoint_url')}: is the local stack up? "
                f"Use {LOCAL_ENDPOINT_HINT}"
            ) from None
        raise


def main(argv: Sequence[str] | None = None, clock: Clock = time.time) -> int:
    """The CLI on ``argv``; ``clock`` is what "now" is to its commands (Unix seconds)."""
    try:
        code = _main(argv, clock)
        # Written now, while a closed pipe can still be caught, not at exit.
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader stopped early (`| head -1`): the rest goes nowhere, quietly,
        # as the Python docs advise for SIGPIPE; exit's own flush must not fail again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return FAILED
    return code


def _main(argv: Sequence[str] | None, clock: Clock) -> int:
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exit_:
        # argparse already printed help, the version or the usage error.
        return exit_.code if isinstance(exit_.code, int) else USAGE
    try:
        return run(args, clock)
    except OpsError as exc:
        message, code = str(exc), exc.exit_code
    except (DiscoveryError, ConfigurationError) as exc:
        message, code = str(exc), FAILED
    except NoCredentialsError:
        message, code = "no AWS credentials found (AWS_PROFILE, environment or SSO)", FAILED
    except ProfileNotFound as exc:
        message = (
            f"no AWS profile {exc.kwargs.get('profile')!r} (--profile or AWS_PROFILE): "
            "`aws configure list-profiles` shows the ones there are"
        )
        code = FAILED
    except NoRegionError:
        message, code = "no AWS region: pass --region or set AWS_REGION", FAILED
    except EndpointConnectionError as exc:
        message, code = f"cannot reach {exc.kwargs.get('endpoint_url')}", FAILED
    except ClientError as exc:
        message, code = _aws_error(exc), FAILED
    except BotoCoreError as exc:
        message, code = f"AWS call failed: {exc}", FAILED
    except KeyboardInterrupt:
        return 130
    note(f"{PROG}: {message}")
    return code


if __name__ == "__main__":
    sys.exit(main())
