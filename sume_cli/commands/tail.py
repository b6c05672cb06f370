"""``tail``: a deployment's job events, live, one line each (``sume_cli.tailing``)."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from collections.abc import Callable
from types import FrameType
from typing import Any

from botocore.exceptions import ClientError

from infra import spec
from sume_cli import USAGE, OpsError
from sume_cli.context import Ops
from sume_cli.output import as_json_output, note, out
from sume_cli.stackinfo import local_log_groups
from sume_cli.tailing import Follower, JobEventLine, follow
from sume_cli.times import parse_since

# Seconds between reads: one FilterLogEvents call per log group each time.
EVERY_SECONDS = 2.0
# Each function's log group sits under its construct, ``Functions/<Name>/Logs``.
FUNCTION_LOGS = "Functions"
INTERRUPTED = 130
TERMINATED = 143


class Terminated(Exception):
    """SIGTERM: stop as Ctrl-C does."""


def add_tail_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument(
        "--since",
        help="first the events since then (10m, 2h, 7d or an ISO time, UTC), then follow; "
        "default: from now",
    )
    return parser


def stage_log_groups(cloudformation: Any, stack_name: str) -> list[str]:
    """The stage's functions' log groups, from its stack's resources."""
    pages = cloudformation.get_paginator("list_stack_resources").paginate(StackName=stack_name)
    try:
        groups = [
            r["PhysicalResourceId"]
            for page in pages
            for r in page["StackResourceSummaries"]
            if r["ResourceType"] == "AWS::Logs::LogGroup"
            and r["LogicalResourceId"].startswith(FUNCTION_LOGS)
            and r.get("PhysicalResourceId")
        ]
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") != "ValidationError":
            raise
        region = cloudformation.meta.region_name
        raise OpsError(f"no stack {stack_name} in {region}: is the stage deployed there?") from None
    if not groups:
        raise OpsError(f"stack {stack_name} has no log group of its functions")
    return sorted(groups)


def local_groups(logs: Any, prefix: str) -> list[str]:
    """The local stack's functions' log groups, each checked to be there."""
    wanted = sorted(local_log_groups(prefix).values())
    found = {
        group["logGroupName"]
        for page in logs.get_paginator("describe_log_groups").paginate(
            logGroupNamePrefix=f"/aws/lambda/{prefix}-"
        )
        for group in page["logGroups"]
    }
    missing = [group for group in wanted if group not in found]
    if missing:
        raise OpsError(
            f"no log group {', '.join(missing)} on the local stack: is it running, "
            f"with this --prefix ({prefix})? A stack started before its functions logged "
            "to moto needs a restart (`make run`)"
        )
    return wanted


def log_groups(ops: Ops) -> list[str]:
    ops.require_deployment()
    if ops.endpoint_url:
        ops.stack  # noqa: B018 - a wrong endpoint or prefix fails here, named as elsewhere
        return local_groups(ops.client("logs"), ops.prefix)
    assert ops.stage is not None
    return stage_log_groups(ops.client("cloudformation"), spec.stack_name(ops.stage))


def printer(as_json: bool) -> Callable[[JobEventLine], None]:
    def show(found: JobEventLine) -> None:
        if as_json:
            out(json.dumps(found.as_json(), ensure_ascii=False, sort_keys=True, default=str))
        else:
            out(found.text())
        sys.stdout.flush()

    return show


def _terminated(signum: int, frame: FrameType | None) -> None:
    raise Terminated


def cmd_tail(
    ops: Ops,
    args: argparse.Namespace,
    clock: Callable[[], float] = time.time,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    now = clock()
    since = parse_since(args.since, int(now)) if args.since else now
    if since > now:
        raise OpsError(f"--since {args.since!r} is in the future", USAGE)
    groups = log_groups(ops)
    follower = Follower(ops.client("logs"), groups, since)
    note(
        f"following the job events of {len(groups)} log group(s)"
        f"{' since ' + args.since if args.since else ''}; Ctrl-C stops "
        "(nothing is subscribed: nothing to clean up)"
    )
    before = signal.signal(signal.SIGTERM, _terminated)
    try:
        follow(follower, printer(as_json_output(args)), clock, sleep, EVERY_SECONDS)
    except KeyboardInterrupt:
        note("stopped (Ctrl-C)")
        return INTERRUPTED
    except Terminated:
        note("stopped (SIGTERM)")
        return TERMINATED
    finally:
        signal.signal(signal.SIGTERM, before)
    raise AssertionError("follow returns only by raising")
