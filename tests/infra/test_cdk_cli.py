"""`npx cdk` works right after `make install`, as the README says: the install puts
the pinned CDK CLI where npx finds it, and cdk.json runs the app the synth tests run."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from tests.infra.conftest import credential_free_env

ROOT = Path(__file__).resolve().parents[2]


def test_make_install_installs_the_pinned_cdk_cli() -> None:
    # As if the lock had changed: make prints what install would run, runs nothing.
    plan = subprocess.run(
        ["make", "-n", "-W", "package-lock.json", "install"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "npm ci" in plan.stdout


@pytest.fixture(scope="module")
def typo_synth(tmp_path_factory: pytest.TempPathFactory) -> subprocess.CompletedProcess[str]:
    """One `npx cdk synth` with a misspelt context key, verbose: the CLI logs its version,
    then runs the app, which refuses the key. Each CLI start costs seconds of node."""
    assert (ROOT / "node_modules" / ".bin" / "cdk").exists(), "run make install"
    home = tmp_path_factory.mktemp("cdk-home")
    env = {**credential_free_env(home), "CDK_DISABLE_CLI_TELEMETRY": "1"}
    typo = ["-c", "stage=dev", "-c", "alarm_emial=ops@example.com", "-o", str(home / "out")]
    return subprocess.run(
        ["npx", "--no-install", "cdk", "synth", "--no-notices", "--verbose", *typo],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_npx_cdk_is_the_pinned_cli_and_runs_the_projects_app(
    typo_synth: subprocess.CompletedProcess[str],
) -> None:
    pinned = json.loads((ROOT / "package.json").read_text())["devDependencies"]["aws-cdk"]
    # The CLI logs to stdout where it detects CI (CI=true, as CI services set it), to
    # stderr elsewhere: its version line is looked for in both.
    logs = typo_synth.stdout + typo_synth.stderr
    (version,) = re.findall(r"CDK Toolkit CLI version: (\S+)", logs)
    assert version == pinned
    app = json.loads((ROOT / "cdk.json").read_text())["app"].split()
    # The interpreter make install creates, on the app the synth tests synthesize.
    assert app == [".venv/bin/python", "app.py"]
    assert (ROOT / app[0]).exists()


def test_the_cdk_cli_s_context_is_checked_too(
    typo_synth: subprocess.CompletedProcess[str],
) -> None:
    # The CLI hands the app its context in CDK_CONTEXT_JSON, its own keys among
    # them (aws:cdk:..., cdk.json's feature flags): only a key of neither kind stops it.
    assert typo_synth.returncode != 0
    assert "error: unknown context key alarm_emial (did you mean alarm_email?)" in typo_synth.stderr
    assert "Traceback" not in typo_synth.stderr
