"""Servers in a process of their own: the artifact origin and moto's server (the bench's
copies, the tests' lagged origin).

A copy measured in another process never shares an interpreter lock with them (a server
slowed by the copier's threads would make the copy look slower than it is).

``python -m devstack.servers origin --size N [--rate B] [--no-ranges]
[--change-after B]`` or ``... moto`` prints ``ready <url>`` and serves until its stdin closes, so
it ends with its parent even when the parent is killed.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import subprocess
import sys
from collections.abc import Iterator

READY = "ready"


@contextlib.contextmanager
def spawned(*args: str) -> Iterator[str]:
    """Run one server process for the duration of the block; yields its URL."""
    process = subprocess.Popen(  # noqa: S603 - this interpreter running our own module
        [sys.executable, "-m", "devstack.servers", *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdin is not None and process.stdout is not None
    try:
        word, _, url = process.stdout.readline().strip().partition(" ")
        if word != READY:
            raise RuntimeError(f"server {args} did not start (exit code {process.poll()})")
        yield url
    finally:
        process.stdin.close()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _serve_until_stdin_closes(url: str) -> None:
    print(READY, url, flush=True)
    sys.stdin.read()


def _origin(args: argparse.Namespace) -> None:
    from devstack.origin import Origin

    with Origin(
        args.size,
        rate=args.rate,
        ranges=not args.no_ranges,
        change_after=args.change_after,
        seed=args.seed,
    ) as origin:
        _serve_until_stdin_closes(origin.url)


def _moto(args: argparse.Namespace) -> None:
    from moto.server import ThreadedMotoServer

    # moto's server logs every request through werkzeug.
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        _serve_until_stdin_closes(f"http://{host}:{port}")
    finally:
        server.stop()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m devstack.servers")
    kinds = parser.add_subparsers(required=True)
    origin = kinds.add_parser("origin", help="the generated artifact (see devstack.origin)")
    origin.add_argument("--size", type=int, required=True)
    origin.add_argument("--rate", type=float, default=None, help="bytes/s per connection")
    origin.add_argument("--no-ranges", action="store_true")
    origin.add_argument("--change-after", type=int, default=None, help="bytes served")
    origin.add_argument("--seed", type=int, default=1)
    origin.set_defaults(serve=_origin)
    moto = kinds.add_parser("moto", help="moto's threaded server (S3 and the rest)")
    moto.set_defaults(serve=_moto)
    args = parser.parse_args(argv)
    args.serve(args)


if __name__ == "__main__":
    main()
