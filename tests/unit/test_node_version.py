"""The Node.js releases the project needs: named once, in package.json's engines, and
those the pinned CDK supports (its CLI's engines, and the jsii runtime behind
aws-cdk-lib, which warns on any other)."""

from __future__ import annotations

import importlib.util
import json
import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# How the jsii runtime (minified) lists the releases it knows.
RELEASE = re.compile(
    r'NodeRelease\((\d+),\{endOfLife:new Date\("(\d{4}-\d{2}-\d{2})"\)(,untested:!0)?'
)
# A Node release written down outside package.json: "Node 20", "Node.js 18+", "node v22".
STATED = re.compile(r"\bnode(?:\.js)?\s+v?\d+", re.IGNORECASE)


@dataclass(frozen=True)
class Release:
    end_of_life: str
    untested: bool


def engines_majors() -> list[int]:
    engines = json.loads((ROOT / "package.json").read_text())["engines"]["node"]
    ranges = [part.strip() for part in engines.split("||")]
    assert all(re.fullmatch(r"\^\d+", r) for r in ranges), f"majors as ^N || ^M: {engines}"
    return sorted(int(r[1:]) for r in ranges)


def jsii_releases() -> dict[int, Release]:
    spec = importlib.util.find_spec("jsii")
    assert spec is not None and spec.submodule_search_locations
    runtime = Path(next(iter(spec.submodule_search_locations)))
    text = (runtime / "_embedded" / "jsii" / "bin__jsii-runtime.js").read_text()
    releases = {int(m[1]): Release(m[2], bool(m[3])) for m in RELEASE.finditer(text)}
    assert releases, "the pinned jsii no longer lists its Node releases this way"
    return releases


def test_engines_names_the_newest_releases_the_pinned_jsii_runtime_tests_none_skipped() -> None:
    majors = engines_majors()
    releases = jsii_releases()
    assert all(m in releases and not releases[m].untested for m in majors), (majors, releases)
    oldest = min(releases[m].end_of_life for m in majors)
    supported_since = sorted(
        m for m, r in releases.items() if not r.untested and r.end_of_life >= oldest
    )
    assert majors == supported_since


def test_the_pinned_cdk_cli_runs_on_every_release_engines_names() -> None:
    lock = json.loads((ROOT / "package-lock.json").read_text())
    cli = lock["packages"]["node_modules/aws-cdk"]["engines"]["node"]
    floor = re.fullmatch(r">=\s*(\d+)(?:\.\d+)*", cli)
    assert floor, f"the CDK CLI's engines changed shape: {cli}"
    assert min(engines_majors()) >= int(floor[1])


def test_no_page_or_makefile_names_a_node_release_of_its_own() -> None:
    pages = [ROOT / "README.md", ROOT / "Makefile", *sorted((ROOT / "docs").glob("*.md"))]
    stated = {page.name: STATED.findall(page.read_text()) for page in pages}
    assert {name: found for name, found in stated.items() if found} == {}
    assert "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION" not in (ROOT / "Makefile").read_text()
    assert "`engines` in `package.json`" in (ROOT / "README.md").read_text()


def test_the_node_the_lock_file_pins_is_one_engines_names() -> None:
    """make install puts it in node_modules/.bin, whatever Node the machine has."""
    from infra.node import supports

    package = json.loads((ROOT / "package.json").read_text())
    pinned = package["optionalDependencies"]["node"]
    lock = json.loads((ROOT / "package-lock.json").read_text())
    assert lock["packages"]["node_modules/node"]["version"] == pinned
    assert supports(package["engines"]["node"], pinned)
    # npm runs the package's install script (it fetches the binary) only where allowed.
    assert package["allowScripts"] == {f"node@{pinned}": True}


def test_a_version_is_supported_only_within_a_caret_range_of_engines() -> None:
    from infra.node import supports

    assert supports("^22 || ^24", "v22.23.3") and supports("^22 || ^24", "24.0.0")
    assert not supports("^22 || ^24", "v20.20.2") and not supports("^22 || ^24", "v23.1.0")
    assert supports("^22.5", "v22.5.0") and not supports("^22.5", "v22.4.9")
