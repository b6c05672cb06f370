"""``make run`` (``python -m devstack``): the local stack in the foreground until Ctrl-C,
its banner, the journal on stdout, and one line naming what to change when it cannot start."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from collections.abc import Mapping
from types import FrameType
from typing import NoReturn

from devstack import dynamodb_local
from devstack.journal import printer
from devstack.settings import DevStackSettings, PortTaken
from devstack.stack import DevStack
from sume.core.errors import ConfigurationError
from sume.core.names import Env


def start_problem(
    exc: OSError | ConfigurationError | RuntimeError, port_variables: Mapping[str, str]
) -> str:
    """Why the stack could not start, in one line naming what to change."""
    if isinstance(exc, PortTaken):
        return f"cannot start: {exc}: set {port_variables[exc.role]} to a free one"
    return f"cannot start: {exc}"


def exit_now(code: int) -> NoReturn:
    """Exit with ``code`` once the stack has stopped.

    What is left then is the interpreter taking moto's and botocore's heap apart:
    seconds on a busy laptop before the shell's prompt comes back after Ctrl-C.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _port(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    try:
        return int(raw) if raw else default
    except ValueError:
        raise SystemExit(f"{name} must be a port number, got {raw!r}") from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m devstack",
        description="The webhook receiver, worker and poller on an embedded moto server.",
    )
    parser.add_argument("--port", type=int, default=_port("PORT", 8080))
    parser.add_argument("--moto-port", type=int, default=_port("MOTO_PORT", 5000))
    parser.add_argument("--poll-every", type=float, default=2.0, help="poller interval (s)")
    args = parser.parse_args(argv)
    stack = DevStack(
        DevStackSettings(
            port=args.port,
            moto_port=args.moto_port,
            signing_secret=os.environ.get(Env.SUME_COM_WEBHOOK_SIGNING_SECRET) or None,
            prefix="sume-local",
            poll_every_seconds=args.poll_every,
            dynamodb=dynamodb_local.engine_from_env(),
        ),
        echo=printer(),
    )
    stopping = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stopping.set()

    try:
        stack.start()
    except (OSError, ConfigurationError, dynamodb_local.Unavailable) as exc:
        ports = {"webhook": "PORT (or --port)", "moto": "MOTO_PORT (or --moto-port)"}
        print(start_problem(exc, ports), file=sys.stderr)
        return 1
    signal.signal(signal.SIGTERM, on_signal)
    for line in stack.describe():
        print(line)
    print("Ctrl-C stops. Job events as they flow:", flush=True)
    try:
        while not stopping.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    # A second Ctrl-C while the loops wind down would only leave a traceback.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    print("stopping...", flush=True)
    stack.stop()
    print("stopped.", flush=True)
    return 0


if __name__ == "__main__":
    exit_now(main())
