"""A local stack of its own, in a child process, for a test that must see only its jobs.

One process runs one stack (its handlers read the process's environment), and the
package's shared stack holds the jobs every other test left. ``python -m
tests.e2e.own_stack INFO`` starts the stack as the package's is started, writes
what a test needs to reach it to the file INFO, and runs until its stdin closes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import boto3

from sume.store.jobs import JobsTable
from tests.e2e.conftest import E2E_STACK, local_stack

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class OwnStack:
    url: str
    """The webhook URL."""
    endpoint_url: str
    prefix: str
    signing_secret: str
    table: str
    region: str

    def jobs(self) -> JobsTable:
        client = boto3.client(
            "dynamodb",
            endpoint_url=self.endpoint_url,
            region_name=self.region,
            aws_access_key_id="local",
            aws_secret_access_key="local",
        )
        return JobsTable(client, self.table, int(E2E_STACK["DUE_SHARDS"]))


@contextmanager
def own_stack(workdir: Path, ready_within: float = 120) -> Iterator[OwnStack]:
    """The child's stack, until the block ends; its output goes to ``workdir``'s log."""
    info = workdir / "stack.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    with (workdir / "stack.log").open("w") as log:
        child = subprocess.Popen(
            [sys.executable, "-m", "tests.e2e.own_stack", str(info)],
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            deadline = time.monotonic() + ready_within
            while not info.exists():
                assert child.poll() is None, (workdir / "stack.log").read_text()
                assert time.monotonic() < deadline, "the child's stack did not start"
                time.sleep(0.1)
            yield OwnStack(**json.loads(info.read_text()))
        finally:
            assert child.stdin is not None
            child.stdin.close()
            if child.wait(timeout=60) != 0:
                raise AssertionError((workdir / "stack.log").read_text())


def main(info: str) -> int:
    with local_stack() as stack:
        assert stack.names is not None
        ready = {
            "url": stack.url,
            "endpoint_url": stack.endpoint_url,
            "prefix": stack.prefix,
            "signing_secret": stack.signing_secret,
            "table": stack.names.table,
            "region": stack.settings.region,
        }
        partial = Path(info + ".partial")
        partial.write_text(json.dumps(ready))
        partial.rename(info)  # whole, or not there
        sys.stdin.read()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1]))
