"""quicktype over every schema at once, as docs/integrating.md runs it: clean names.

Each type once (one ``Artifact``, however many details list artifacts), each
detail named after its detail-type, each whole event after it with ``Event``,
and the shared enums, in TypeScript, Go and Java.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from infra.schemas import files as schema_files
from sume.contract.envelope import TERMINAL_EVENTS
from sume.core.names import DETAIL_TYPES, REGISTRATION_DETAIL_TYPE, REGISTRATION_REFUSED_DETAIL_TYPE
from sume.polling.registration import REFUSAL_REASONS
from tests.docs import scratch_root
from tests.schema_tools import ROOT, code_block, installed

DETAILS = {
    t.replace(" ", "")
    for t in [*DETAIL_TYPES.values(), REGISTRATION_REFUSED_DETAIL_TYPE, REGISTRATION_DETAIL_TYPE]
}
# Metadata has no fixed shape: a map in every language, no type of its own.
SHARED = set(schema_files.DEFINITIONS) - {"Metadata"}
# The announcements' one fixed source, sume.webhooks.
TYPES = {*DETAILS, *(f"{d}Event" for d in DETAILS), *SHARED, "Source"}
ENUMS = {
    "Outcome": set(TERMINAL_EVENTS.values()),
    "Event": set(TERMINAL_EVENTS),
    "RefusalReason": set(REFUSAL_REASONS),
}


# Four node processes (make, then quicktype three times): on a loaded machine they
# outlast pytest-timeout's bound per test, made for a test's own work.
BOUND = 300
pytestmark = pytest.mark.timeout(BOUND + 60)


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The documented commands' output, run as written from a copy of the repository's root."""
    where = scratch_root(tmp_path_factory.mktemp("bindings"))
    installed(".bin/quicktype")
    script = code_block("### Bindings with quicktype", "bash")
    assert script.count("npx --prefix tools/schema-check quicktype ") == 3
    subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=where,
        stdin=subprocess.DEVNULL,
        check=True,
        capture_output=True,
        timeout=BOUND,
    )
    return where


def test_typescript_has_each_type_once_named_after_its_detail_type(generated: Path) -> None:
    code = (generated / "sume-events.ts").read_text()
    names = re.findall(r"^export (?:interface|enum|type) (\w+)", code, re.M)
    assert sorted(names) == sorted(TYPES)
    for enum, values in ENUMS.items():
        body = re.search(rf"^export enum {enum} \{{\n(.*?)^\}}", code, re.M | re.S)
        assert body, enum
        assert set(re.findall(r'= "([^"]+)"', body.group(1))) == values
    completed = re.search(r"^export interface SumeJobCompleted \{\n(.*?)^\}", code, re.M | re.S)
    assert completed
    assert re.search(r"^\s+outcome:\s+Outcome;$", completed.group(1), re.M)
    assert re.search(r"^\s+artifacts:\s+Artifact\[\];$", completed.group(1), re.M)


def test_go_has_each_type_once_named_after_its_detail_type(generated: Path) -> None:
    code = (generated / "sume_events.go").read_text()
    names = re.findall(r"^type (\w+) (?:struct|string)\b", code, re.M)
    assert sorted(names) == sorted(TYPES)
    for enum, values in ENUMS.items():
        assert set(re.findall(rf'^\t\w+\s+{enum} = "([^"]+)"$', code, re.M)) == values


def test_java_has_each_type_once_named_after_its_detail_type(generated: Path) -> None:
    files = {p.stem for p in (generated / "java").glob("*.java")}
    assert files == {*TYPES, "Converter"}
    for enum, values in ENUMS.items():
        code = (generated / "java" / f"{enum}.java").read_text()
        assert f"public enum {enum} " in code
        assert set(re.findall(r'return "([^"]+)";', code)) == values


@pytest.mark.parametrize("target", ["test", "test-fast"])
def test_the_test_targets_install_the_pinned_tools_before_the_tests_run(target: str) -> None:
    """A clean clone (.ci/run) has no node_modules in tools/schema-check."""
    result = subprocess.run(
        ["make", "-n", "-o", ".venv/.synced", "-W", "tools/schema-check/package-lock.json", target],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    lines = result.stdout.splitlines()
    npm = [
        i for i, line in enumerate(lines) if line.startswith("npm ci --prefix tools/schema-check")
    ]
    tests = [i for i, line in enumerate(lines) if " -m pytest" in line]
    assert len(npm) == 1
    assert tests
    assert npm[0] < tests[0]
