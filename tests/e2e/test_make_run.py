"""`make run` as a user meets it: ``python -m devstack`` started from a shell's
environment (not the test session's, which sets the functions' log level), its
banner, and every line it prints while idle and for one job."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import IO

import pytest

from devstack.simulator import Sume

BANNER_TITLE = "Sume webhooks: local stack on moto (no AWS account involved)"
BANNER_END = "Ctrl-C stops. Job events as they flow:"
# Generous: a start is mostly Python importing moto, botocore and the handlers,
# slow on a busy machine. Nothing here asserts how long anything took.
PATIENCE_SECONDS = 180
# A stretch of the poller's ticks (every 0.5 s here) with nothing to do.
IDLE_SECONDS = 3


def shell_environment() -> dict[str, str]:
    """What a terminal hands `make run`: no POWERTOOLS_*, no AWS settings (and none of
    the developer's AWS files, so the test cannot reach an account)."""
    return {
        "PATH": os.environ["PATH"],
        "HOME": os.environ.get("HOME", "/"),
        "LANG": "C.UTF-8",
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
        "AWS_EC2_METADATA_DISABLED": "true",
    }


class Console:
    """The stack's stdout, line by line as it comes, and its stderr."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._stderr: list[str] = []
        self.process = process
        assert process.stdout is not None and process.stderr is not None
        threading.Thread(target=self._read, args=(process.stdout,), daemon=True).start()
        self._errors = threading.Thread(target=self._stderr.extend, args=(process.stderr,))
        self._errors.daemon = True
        self._errors.start()

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            self._lines.put(line.rstrip("\n"))
        self._lines.put(None)

    def line(self) -> str:
        line = self._lines.get(timeout=PATIENCE_SECONDS)
        assert line is not None, f"the stack ended: {''.join(self._stderr)}"
        return line

    def until(self, last: str) -> list[str]:
        """Lines up to and including the first that starts with ``last``."""
        lines = [self.line()]
        while not lines[-1].startswith(last):
            lines.append(self.line())
        return lines

    def printed_so_far(self) -> list[str]:
        lines = []
        while not self._lines.empty():
            line = self._lines.get()
            if line is not None:
                lines.append(line)
        return lines

    def rest(self) -> tuple[list[str], str]:
        """Every line until the stack ended, and its whole stderr."""
        lines = []
        while (line := self._lines.get(timeout=PATIENCE_SECONDS)) is not None:
            lines.append(line)
        self._errors.join(PATIENCE_SECONDS)
        return lines, "".join(self._stderr)


@pytest.fixture
def make_run() -> Iterator[Console]:
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "devstack",
            "--port",
            "0",
            "--moto-port",
            "0",
            "--poll-every",
            "0.5",
        ],
        env=shell_environment(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        yield Console(process)
    finally:
        process.kill()
        process.wait()


def banner_value(banner: list[str], label: str) -> str:
    (line,) = [line for line in banner if line.startswith(f"  {label}  ")]
    return line[len(label) + 2 :].split()[0]


def journal(line: str) -> tuple[str, str, str]:
    """A journal line as (kind, job id, detail), its clock checked and dropped."""
    clock, kind, job_id, detail = line.split(maxsplit=3)
    time.strptime(clock, "%H:%M:%S")
    return kind, job_id, detail


def test_make_run_prints_its_banner_first_then_one_line_per_job_event(make_run: Console) -> None:
    banner = make_run.until(BANNER_END)
    assert banner[0] == BANNER_TITLE
    assert not [line for line in banner if line.startswith("{")]
    url, secret = banner_value(banner, "webhook URL"), banner_value(banner, "signing secret")

    # Idle: the poller ticks, the event sources wait; nothing is printed.
    time.sleep(IDLE_SECONDS)
    assert make_run.printed_so_far() == []

    with Sume(url, [secret], spacing_seconds=0.2) as sume:
        job = sume.new_job(artifacts=1)
        assert sume.deliver(job).delivered
        lines = [make_run.line(), make_run.line()]
    assert [journal(line) for line in lines] == [
        ("received", job.job_id, "stored, work queued"),
        ("processed", job.job_id, "completed, 1 artifact(s) stored"),
    ]

    make_run.process.send_signal(signal.SIGINT)  # Ctrl-C
    assert make_run.rest() == (["stopping...", "stopped."], "")
    assert make_run.process.wait(PATIENCE_SECONDS) == 0


def test_make_demo_prints_its_tables_and_nothing_else() -> None:
    demo = subprocess.run(
        [sys.executable, "-m", "devstack.demo"],
        env=shell_environment(),
        capture_output=True,
        text=True,
        timeout=PATIENCE_SECONDS * 2,
        check=False,
    )
    assert (demo.returncode, demo.stderr) == (0, "")
    lines = demo.stdout.splitlines()
    assert not [line for line in lines if line.startswith("{")]
    assert lines[0].startswith("local stack up: http://127.0.0.1:")
    assert lines[1].startswith("Sume simulator: ")
    # Then the tables, each after an empty line, and the verdict: no line per job event.
    assert (lines[2], lines[3]) == ("", "What Sume saw:")
    assert lines[-1].startswith("OK: every job processed exactly once")
    what_sume_saw, per_job, summary, verdict = "\n".join(lines[3:]).split("\n\n")
    assert len(what_sume_saw.splitlines()) == 1 + 11  # a row per case
    assert per_job.split()[:2] == ["job", "outcome"]
    assert len(per_job.splitlines()) == 1 + 9  # a row per job
    assert summary.split()[:2] == ["jobs", "deliveries"]
    assert len(verdict.splitlines()) == 2  # the time it took, then OK
