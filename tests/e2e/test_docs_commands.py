"""Every shell block of the user's pages runs as written, beside `make run`.

The README's, docs/local-stack.md's and docs/integrating.md's ```bash / ```sh
blocks run in page order, each in a fresh ``bash -e -o pipefail`` with a shell's
environment (not this session's: no fake credentials, no Powertools level), from a
scratch copy of the repository's root (tests/docs.py), while the local stack runs
as a user starts it: ``make run`` in a process of its own. A block is skipped only
when an HTML comment before it says ``not run: <why>`` (AWS, the suite itself, or
another test that runs it as written).

One substitution, declared here: the pages use `make run`'s default ports, 8080
(receiver) and 5000 (moto), which other work on this machine may hold; the test
runs its stack on free ports (PORT, MOTO_PORT, as the local-stack page says) and
puts them in their place. The stack runs with shorter poll timings (variables
the page documents), so that a registered job nothing answers for is lost in
seconds rather than ten minutes.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.docs import ROOT, Block, scratch_root, shell_blocks

PAGES = ("README.md", "docs/local-stack.md", "docs/integrating.md")
BLOCKS = [block for page in PAGES for block in shell_blocks(page)]
RUN = [block for block in BLOCKS if block.not_run is None]
DEFAULT_PORTS = {"webhook": 8080, "moto": 5000}
# Documented settings (docs/local-stack.md: "each can be overridden"): a job nothing
# answers for is lost after 3 s instead of 600 s, polled every second or two.
# Two due-work shards, not 16, as on the e2e stacks: an idle round costs a run per shard.
TIMINGS = {
    "POLL_INITIAL_SECONDS": "1",
    "POLL_MAX_INTERVAL_SECONDS": "2",
    "MAX_POLL_AGE_SECONDS": "3",
    "DUE_SHARDS": "2",
}
# Generous bounds on waits for what a working stack does in seconds; none is asserted.
STARTUP_BOUND = 600
BLOCK_BOUND = 600
# A block may install packages (npm ci) or run the demo: pytest-timeout's bound per
# test, made for a test's own work, is lifted to the blocks' own.
pytestmark = pytest.mark.timeout(STARTUP_BOUND + BLOCK_BOUND)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def shell_environment() -> dict[str, str]:
    """What a user's shell has: a PATH (without this session's .venv on it), a home."""
    venv = str(ROOT / ".venv")
    path = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if venv not in p)
    keep = ("HOME", "LANG", "LC_ALL", "TMPDIR", "USER", "TERM")
    return {"PATH": path, **{k: os.environ[k] for k in keep if k in os.environ}}


# `make run` with SIGINT as a terminal leaves it: a test run started in the background
# (`make test &`) hands its children SIGINT ignored, and Ctrl-C would then stop nothing.
MAKE_RUN = [
    sys.executable,
    "-c",
    "import os, signal; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "os.execvp('make', ['make', 'run'])",
]


class MakeRun:
    """`make run` in a process group of its own; what it prints, line by line."""

    def __init__(self, where: Path, ports: dict[str, int]) -> None:
        env = {
            **shell_environment(),
            **TIMINGS,
            "PORT": str(ports["webhook"]),
            "MOTO_PORT": str(ports["moto"]),
            "PYTHONUNBUFFERED": "1",
        }
        self.process = subprocess.Popen(
            MAKE_RUN,
            cwd=where,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        self.lines: list[str] = []
        self._changed = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            with self._changed:
                self.lines.append(line.rstrip("\n"))
                self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    def wait_for(self, *words: str) -> str:
        """The first line holding every word, once printed (or what was printed instead)."""

        def found() -> str | None:
            hits = [line for line in self.lines if all(w in line for w in words)]
            return hits[0] if hits else None

        with self._changed:
            self._changed.wait_for(
                lambda: found() is not None or self.process.poll() is not None,
                timeout=STARTUP_BOUND,
            )
            line = found()
        assert line is not None, f"no line with {words}; make run printed:\n" + self.output()
        return line

    def output(self) -> str:
        return "\n".join(self.lines)

    def running(self) -> None:
        """Still up, or how it ended: a block's refused connection would not say."""
        code = self.process.poll()
        assert code is None, f"make run ended ({code}) before the block:\n{self.output()}"

    def stop(self) -> None:
        """Ctrl-C, as a terminal sends it to the whole foreground group: make dies of
        it, the stack stops and says so."""
        self.running()
        os.killpg(self.process.pid, signal.SIGINT)
        self.process.wait(timeout=STARTUP_BOUND)
        assert self.lines[-1:] == ["stopped."], self.output()


@pytest.fixture(scope="module")
def where(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # `make` in the scratch root would install into what it links to (the .venv,
    # node_modules), from there: all of it must be as `make test` left it.
    up_to_date = subprocess.run(
        [
            "make",
            "-q",
            ".venv/.synced",
            "node_modules/.bin/cdk",
            "tools/schema-check/node_modules/.bin/quicktype",
        ],
        cwd=ROOT,
        env=shell_environment(),
        capture_output=True,
        check=False,
        timeout=60,
    )
    assert up_to_date.returncode == 0, (
        "`make install schema-tools` has work to do (make test does it first), or it would"
        " bootstrap uv: put uv on PATH"
    )
    return scratch_root(tmp_path_factory.mktemp("root"))


@pytest.fixture(scope="module")
def ports() -> dict[str, int]:
    return {"webhook": free_port(), "moto": free_port()}


@pytest.fixture(scope="module")
def make_run(where: Path, ports: dict[str, int]) -> Iterator[MakeRun]:
    running = MakeRun(where, ports)
    try:
        running.wait_for("Ctrl-C stops")
        yield running
    finally:
        running.stop()


def as_run(block: Block, ports: dict[str, int]) -> str:
    body = block.body
    for role, default in DEFAULT_PORTS.items():
        body = body.replace(f"127.0.0.1:{default}", f"127.0.0.1:{ports[role]}")
    return body


@pytest.mark.parametrize("block", RUN, ids=str)
def test_the_block_runs_as_written(
    block: Block, make_run: MakeRun, where: Path, ports: dict[str, int]
) -> None:
    make_run.running()
    done = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", as_run(block, ports)],
        cwd=where,
        env=shell_environment(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        check=False,
        timeout=BLOCK_BOUND,
    )
    assert done.returncode == 0, f"{block} exited {done.returncode}:\n{done.stdout}{done.stderr}"


def test_what_the_pages_say_the_stack_prints_it_printed(make_run: MakeRun) -> None:
    """Runs after the blocks (pytest keeps a file's order): their jobs, as the pages tell."""
    # README: "the local stack prints received then processed".
    make_run.wait_for("received", "job_hello")
    make_run.wait_for("processed", "job_hello")
    # docs/local-stack.md's registration, docs/integrating.md's ("prints registered job_123").
    make_run.wait_for("registered", "job_x")
    make_run.wait_for("registered", "job_123")
    # The JavaScript example's job: nothing answers its status URL, so it is lost.
    make_run.wait_for("lost", "job_456")


def test_each_page_runs_its_local_blocks_and_says_why_it_skips_the_others() -> None:
    """A block is run here unless marked: it needs AWS, it is the README's two
    commands or developers' tools, or another test runs it as written (named)."""
    for block in BLOCKS:
        reason = block.not_run
        if reason is None:
            continue
        named = re.findall(r"tests/[\w/]+\.py", reason)
        assert "AWS account" in reason or named or block.page == "README.md", (str(block), reason)
        for test in named:
            assert (ROOT / test).exists(), f"{block}: {test} does not exist"
    for page in PAGES:
        assert any(b.page == page for b in RUN), f"{page} has no block run"
