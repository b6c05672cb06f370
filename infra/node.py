"""The Node.js behind the CDK: the project's own, pinned in package-lock.json, for jsii,
the CDK CLI and the project's JavaScript, and the one-line check ``make install`` makes.

npm's ``node`` package (an optional dependency in package.json) puts a Node binary of
the release package.json's ``engines`` names in node_modules/.bin, whatever Node the
machine has; where it cannot install, the machine's ``node`` is used, and must be one
of those releases. ``python -m infra.node`` prints nothing when the Node found is
supported, else one line naming it, the releases wanted and where to get one.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import IO

ROOT = Path(__file__).resolve().parents[1]
PROJECT_NODE = ROOT / "node_modules" / ".bin" / "node"
DOWNLOAD = "https://nodejs.org/en/download"


def executable() -> str:
    """The Node jsii runs: ``JSII_NODE`` where set (jsii's own variable), else the
    project's, else the machine's ``node``."""
    given = os.environ.get("JSII_NODE")
    if given:
        return given
    return str(PROJECT_NODE) if PROJECT_NODE.exists() else "node"


def wanted() -> str:
    """The releases package.json's engines names (``^22 || ^24``)."""
    engines: str = json.loads((ROOT / "package.json").read_text())["engines"]["node"]
    return engines


def supports(engines: str, version: str) -> bool:
    """Whether ``version`` (``v22.23.3``) is in ``engines``, caret ranges joined by ``||``."""
    found = tuple(int(n) for n in re.findall(r"\d+", version)[:3])
    for part in engines.split("||"):
        floor = re.fullmatch(r"\^(\d+)(?:\.(\d+))?(?:\.(\d+))?", part.strip())
        if floor is None:
            raise ValueError(f"package.json engines: caret ranges joined by ||, not {part!r}")
        low = tuple(int(n or 0) for n in floor.groups())
        if found[:1] == low[:1] and found >= low:
            return True
    return False


def problem(node: str | None = None) -> str | None:
    """One line saying why ``node`` (by default ``executable()``) cannot run the CDK, or None."""
    node = node or executable()
    engines = wanted()
    try:
        # The Node jsii would run: JSII_NODE, the project's, or the one on PATH.
        version = subprocess.run(  # noqa: S603
            [node, "--version"], capture_output=True, text=True, timeout=60, check=True
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return f"no Node.js found ({node}); the CDK needs Node.js {engines}: get it from {DOWNLOAD}"
    if supports(engines, version):
        return None
    return (
        f"Node.js {version} found ({node}); the CDK needs Node.js {engines} "
        f"(package.json engines): get one from {DOWNLOAD}"
    )


def _text_stderr_sink(reader: IO[bytes]) -> None:
    """jsii's relay of its Node process's stderr, with the lines that are not its own JSON
    (Node's warnings, jsii's banners) written as the text they are: jsii's own prints
    them as Python bytes (``b'!!!...\\n'``)."""
    import base64

    for line in iter(reader.readline, b""):
        try:
            console = json.loads(line)
            if console.get("stderr") is not None:
                sys.stderr.buffer.write(base64.b64decode(console["stderr"]))
            if console.get("stdout") is not None:
                sys.stdout.buffer.write(base64.b64decode(console["stdout"]))
        except (ValueError, AttributeError, TypeError):
            sys.stderr.buffer.write(line)
        sys.stderr.flush()


def use_project_node() -> None:
    """jsii, and ``node`` in the processes this one starts, run the project's Node (if
    installed), as in make's recipes."""
    if not PROJECT_NODE.exists():
        return
    os.environ.setdefault("JSII_NODE", str(PROJECT_NODE))
    bin_dir = str(PROJECT_NODE.parent)
    path = os.environ.get("PATH", "")
    if path.split(os.pathsep)[0] != bin_dir:
        os.environ["PATH"] = f"{bin_dir}{os.pathsep}{path}"


def prepare_jsii() -> None:
    """Before aws_cdk is imported: jsii runs on the project's Node, and what it relays of
    that Node's stderr is printed as text."""
    use_project_node()
    from jsii._kernel.providers import process

    process.stderr_sink = _text_stderr_sink  # type: ignore[assignment]


def main() -> int:
    line = problem()
    if line is None:
        return 0
    print(f"error: {line}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
