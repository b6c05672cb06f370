"""What the bench runs things in: a handler as in Lambda (somewhere to log), a fresh interpreter."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager


@contextmanager
def silenced() -> Iterator[None]:
    """Send fd 1 to /dev/null: the JSON logs and metrics are still formatted and
    written (that work is part of what is measured), just not shown."""
    sys.stdout.flush()
    saved = os.dup(1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)
        os.close(devnull)


def python(
    *args: str, env: Mapping[str, str], timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """This interpreter, in a fresh process, on the bench's own code; output kept as text."""
    return subprocess.run(  # noqa: S603 - this interpreter running the bench's own code
        [sys.executable, *args],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=timeout,
    )
