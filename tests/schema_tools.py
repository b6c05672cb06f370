"""The pinned Node tools that use ``schemas/`` as integrators do (tools/schema-check/),
and the code blocks of docs/integrating.md that the tests run exactly."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCHEMA_CHECK = ROOT / "tools" / "schema-check"
INTEGRATING = ROOT / "docs" / "integrating.md"


def installed(name: str) -> Path:
    """``node_modules/<name>`` of tools/schema-check; ``make test`` installs it (npm ci)."""
    path = SCHEMA_CHECK / "node_modules" / name
    assert path.exists(), f"{path} is missing: run `make test` (it runs npm ci there)"
    return path


def code_block(heading: str, language: str) -> str:
    """The first ``language`` code block under ``heading`` in docs/integrating.md."""
    text = INTEGRATING.read_text(encoding="utf-8")
    start = text.index(f"\n{heading}\n")
    found = re.compile(rf"^```{language}\n(.*?)^```$", re.M | re.S).search(text, start)
    assert found, f"no {language} block under {heading!r}"
    assert "\n#" not in text[start + 1 : found.start()].replace(heading, "", 1), (
        f"the {language} block is not in the section {heading!r}"
    )
    return found.group(1)
