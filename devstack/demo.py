"""``make demo``: the local stack plus the Sume simulator on every delivery path.

Starts a local stack on ephemeral ports (so it never collides with a running
``make run``), plays the scenario of ``devstack.simulator.scenario``, waits (bounded)
until the stack has settled, prints what Sume saw and a summary table (and
nothing else: ``--journal`` adds the stack's line per job event), and exits 1
when an invariant broke: every job processed exactly once, every artifact
stored, nothing in the DLQ, nothing lost.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from devstack.cli import exit_now, start_problem
from devstack.journal import printer
from devstack.settings import DevStackSettings
from devstack.simulator import Sume, SumeJob, scenario
from devstack.stack import DevStack
from sume.core.errors import ConfigurationError
from sume.core.names import Env

# Seconds, so the job whose webhook never arrives is found while you watch.
DEMO_TIMINGS = {
    Env.POLL_INITIAL_SECONDS: "1",
    Env.POLL_MAX_INTERVAL_SECONDS: "4",
    Env.REDELIVER_GRACE_SECONDS: "2",
    Env.SWEEP_AFTER_SECONDS: "10",
}
PORT_VARIABLES = {"webhook": "DEMO_PORT (or --port)", "moto": "DEMO_MOTO_PORT (or --moto-port)"}


def wait_processed(stack: DevStack, job: SumeJob, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while stack.announced()[job.job_id] == 0 and time.monotonic() < deadline:
        time.sleep(0.1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m devstack.demo",
        description="A local stack and the Sume simulator on every delivery path; exits 1 "
        "when a job was not processed exactly once, an artifact is missing, or something "
        "is left in the DLQ.",
    )
    parser.add_argument("--port", type=int, default=int(os.environ.get("DEMO_PORT", "0")))
    parser.add_argument("--moto-port", type=int, default=int(os.environ.get("DEMO_MOTO_PORT", "0")))
    parser.add_argument("--spacing", type=float, default=0.3, help="Sume's attempt spacing (s)")
    parser.add_argument("--timeout", type=float, default=90.0, help="bound on settling (s)")
    parser.add_argument(
        "--journal", action="store_true", help="also print a line per job event as it flows"
    )
    args = parser.parse_args(argv)

    settings = DevStackSettings(
        port=args.port,
        moto_port=args.moto_port,
        prefix="sume-demo",
        poll_every_seconds=0.5,
        retry_delay_seconds=1,
        lambda_env=DEMO_TIMINGS,
    )
    started = time.monotonic()
    stack = DevStack(settings, echo=printer() if args.journal else None)
    try:
        stack.start()
    except (OSError, ConfigurationError) as exc:
        print(start_problem(exc, PORT_VARIABLES), file=sys.stderr)
        return 1
    try:
        print(f"local stack up: {stack.url} (moto {stack.endpoint_url})")
        print(
            f"Sume simulator: 10 attempts per delivery, {args.spacing:g}s apart, 10s timeout;"
            " playing the scenario..."
        )
        with Sume(
            stack.url,
            [stack.signing_secret],
            spacing_seconds=args.spacing,
            api_token=stack.api_token,
        ) as sume:
            run = scenario.drive(
                sume, stack.expect, lambda job: wait_processed(stack, job, args.timeout)
            )
            settled = scenario.settle(stack, run, args.timeout)
            report = scenario.check(stack, run)
        print()
        print("What Sume saw:")
        for line in scenario.delivery_lines(run):
            print("  " + line)
        print()
        for line in report.lines():
            print(line)
    finally:
        stack.stop()
    print(f"\n({time.monotonic() - started:.1f}s)")
    if not settled:
        print(f"FAILED: the stack did not settle within {args.timeout:g}s", file=sys.stderr)
    for problem in report.problems:
        print(f"FAILED: {problem}", file=sys.stderr)
    if settled and report.ok:
        print(
            "OK: every job processed exactly once, every artifact stored, "
            "nothing lost, nothing in the DLQ"
        )
        return 0
    return 1


if __name__ == "__main__":
    exit_now(main())
