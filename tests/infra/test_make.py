"""The Makefile and cdk.json as an operator meets them: help, synth, the AWS preflight."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from infra import node, spec
from tests.infra.conftest import ROOT, Cloud, credential_free_env


def make(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    # -o: never re-sync the .venv from a test, even if pyproject.toml looks newer.
    return subprocess.run(
        ["make", "--no-print-directory", "-o", ".venv/.synced", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def phony_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text()
    return {t for line in re.findall(r"^\.PHONY:(.*)$", text, re.M) for t in line.split()}


def test_help_lists_every_phony_target_from_its_own_line() -> None:
    result = make("help")
    assert result.returncode == 0, result.stderr
    listed = {line.split()[1] for line in result.stdout.splitlines()}
    assert listed == phony_targets()
    assert all(len(line.split(maxsplit=2)) == 3 for line in result.stdout.splitlines())


@pytest.mark.parametrize("cores", [1, 7])
def test_the_tests_run_one_worker_more_than_the_cores_this_process_may_use(
    cores: int, tmp_path: Path
) -> None:
    """The count is nproc's, which honours a cpuset or taskset (as some CI runners give);
    getconf counted the machine's. A stand-in nproc on PATH says how many."""
    nproc = tmp_path / "nproc"
    nproc.write_text(f"#!/bin/sh\necho {cores}\n")
    nproc.chmod(0o755)
    # Not the XDIST a `make test XDIST=...` around this run passes down in MAKEFLAGS.
    outside = ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "XDIST")
    env = {k: v for k, v in os.environ.items() if k not in outside}
    env["PATH"] = f"{tmp_path}{os.pathsep}{env['PATH']}"
    result = make("-n", "test", env=env)
    assert result.returncode == 0, result.stderr
    (line,) = [line for line in result.stdout.splitlines() if " -m pytest" in line]
    assert line.startswith("PYTHONDONTWRITEBYTECODE= ")
    assert f" -m pytest -n {cores + 1} --dist loadfile" in line


def test_cdk_json_runs_the_app_with_the_projects_environment() -> None:
    """A bare `cdk synth` failed with ModuleNotFoundError when cdk.json said python3."""
    command = shlex.split(json.loads((ROOT / "cdk.json").read_text())["app"])
    assert command[1:] == ["app.py"]
    finds_cdk = "import importlib.util, sys; sys.exit(importlib.util.find_spec('aws_cdk') is None)"
    result = subprocess.run(
        [str(ROOT / command[0]), "-c", finds_cdk], cwd=ROOT, timeout=60, check=False
    )
    assert result.returncode == 0


def test_synth_names_the_templates_it_wrote_not_those_left_behind(
    cloud: Cloud, tmp_path: Path
) -> None:
    """After a two-region synth, `make synth` named a single-region template that was
    only an earlier synth's leftover: the line now comes from the manifest."""
    assert "-m infra.assembly cdk.out" in make("-n", "synth", "STAGE=qa").stdout
    shutil.copy(cloud.outdir / "manifest.json", tmp_path / "manifest.json")
    (tmp_path / f"{spec.stack_name('stale')}.template.json").write_text("{}")
    result = subprocess.run(
        [sys.executable, "-m", "infra.assembly", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    named = set(result.stdout.removeprefix("template: ").split(" (cloud assembly")[0].split())
    assert named == {str(tmp_path / Path(t).name) for t in cloud.templates}
    assert not any("stale" in name for name in named)


def test_a_setting_that_cannot_be_deployed_stops_the_synth_with_one_line(tmp_path: Path) -> None:
    result = make("synth", "STAGE=prod", env=credential_free_env(tmp_path))
    assert result.returncode != 0
    (line,) = [line for line in result.stderr.splitlines() if not line.startswith("make")]
    assert line.startswith("error: context status_allowed_hosts must be set for stage 'prod'")


@pytest.mark.parametrize(
    ("context", "message"),
    [
        # It used to deploy with no alarm e-mail and no warning.
        (
            "-c alarm_emial=ops@example.com",
            "error: unknown context key alarm_emial (did you mean alarm_email?): "
            "docs/operations.md lists them",
        ),
        ("-c due_shards=0", "error: context due_shards must be within 1..1000, got 0"),
        # Past what a default account takes: the quota that binds and its request.
        (
            "-c sume_peak_jobs_per_second=41",
            "error: context sume_peak_jobs_per_second=41 is past what this stage takes, 40 "
            "jobs/s (800 requests/s at Sume's worst case): Lambda concurrent executions binds "
            "(1002 needed, 1000 available): request 1002 in Service Quotas (aws service-quotas "
            "request-service-quota-increase --service-code lambda --quota-code L-B99A9384 "
            "--desired-value 1002), then set -c lambda_concurrency_quota=1002",
        ),
    ],
)
def test_a_misspelt_or_out_of_range_setting_stops_the_synth_before_the_cdk_starts(
    tmp_path: Path, context: str, message: str
) -> None:
    # Python lists every module it imports on stderr: the CDK is not among them.
    env = {**credential_free_env(tmp_path), "PYTHONPROFILEIMPORTTIME": "1"}
    result = make("synth", "STAGE=dev", f"CONTEXT={context}", env=env)
    assert result.returncode != 0
    assert "import time:" in result.stderr
    assert "aws_cdk" not in result.stderr
    said = [line for line in result.stderr.splitlines() if not line.startswith(("make", "import"))]
    assert said == [message]


def test_without_credentials_cdk_targets_stop_at_once_and_say_what_to_do(tmp_path: Path) -> None:
    for target in ("check-aws", "bootstrap", "diff", "deploy", "destroy"):
        result = make(target, env=credential_free_env(tmp_path))
        assert result.returncode != 0, target
        assert "no AWS credentials: set AWS_PROFILE" in result.stderr, target
        assert "make bootstrap" in result.stderr
        # Stopped before installing or running the CDK CLI (a 25 s synth).
        assert "cdk" not in result.stdout.replace("make bootstrap", ""), target
        assert "Traceback" not in result.stderr


def test_an_unknown_profile_is_named(tmp_path: Path) -> None:
    env = {**credential_free_env(tmp_path), "AWS_PROFILE": "nosuch"}
    result = make("check-aws", env=env)
    assert result.returncode != 0
    assert "AWS_PROFILE=nosuch names no profile" in result.stderr
    assert "Traceback" not in result.stderr


def test_with_credentials_the_preflight_says_which_and_where(tmp_path: Path) -> None:
    env = {
        **credential_free_env(tmp_path),
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_REGION": "eu-west-1",
    }
    result = make("check-aws", env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "AWS credentials from env; region eu-west-1"

    del env["AWS_REGION"]
    result = make("check-aws", env=env)
    assert result.returncode == 0, result.stderr
    assert "no region set, so the CDK CLI uses us-east-1" in result.stdout


# -- the Node.js and Python the project runs on ----------------------------------------


def stand_in(directory: Path, name: str, script: str) -> Path:
    path = directory / name
    path.write_text(f"#!/bin/sh\n{script}\n")
    path.chmod(0o755)
    return path


def node_check(node: Path | str | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "JSII_NODE"}
    if node is not None:
        env["JSII_NODE"] = str(node)
    return subprocess.run(
        [sys.executable, "-m", "infra.node"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_installed_node_is_the_projects_own_and_a_supported_one() -> None:
    """make install puts package-lock.json's Node in node_modules/.bin and checks it."""
    assert node.executable() == str(node.PROJECT_NODE)
    result = node_check(None)
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")
    install = make("-n", "-B", "-o", ".venv/.synced", "node_modules/.bin/cdk").stdout
    assert "-m infra.node" in install


def test_the_synth_runs_on_the_projects_node_and_prints_nothing(cloud: Cloud) -> None:
    """On the machine's Node 20, jsii printed its end-of-life banner at every synth."""
    assert cloud.synth_stderr == ""


def test_an_unsupported_node_is_named_in_one_line_with_the_releases_wanted(
    tmp_path: Path,
) -> None:
    old = stand_in(tmp_path, "node", "echo v20.20.2")
    result = node_check(old)
    assert result.returncode == 1
    assert result.stderr == (
        f"error: Node.js v20.20.2 found ({old}); the CDK needs Node.js {node.wanted()} "
        "(package.json engines): get one from https://nodejs.org/en/download\n"
    )
    missing = tmp_path / "no-node"
    result = node_check(missing)
    assert result.returncode == 1
    assert result.stderr == (
        f"error: no Node.js found ({missing}); the CDK needs Node.js {node.wanted()}: "
        "get it from https://nodejs.org/en/download\n"
    )


def test_a_python_older_than_the_project_needs_stops_make_in_one_line(tmp_path: Path) -> None:
    """Where uv finds no Python the project can use, make says which python3 it found."""
    stand_in(tmp_path, "uv", "exit 2")  # `uv python find` finds none
    stand_in(tmp_path, "python3", "echo 3.9.2")
    env = {**os.environ, "PATH": f"{tmp_path}{os.pathsep}{os.environ['PATH']}"}
    venv = tmp_path / "venv"
    result = make(f"UV={tmp_path / 'uv'}", f"VENV={venv}", f"{venv}/.synced", env=env)
    assert result.returncode != 0
    (line,) = [line for line in result.stderr.splitlines() if not line.startswith("make")]
    assert line == (
        "error: Python >=3.11 is needed, found 3.9.2 (python3): get one from "
        f"https://www.python.org/downloads/ or run '{tmp_path / 'uv'} python install 3.13'"
    )
    assert not venv.exists()


def test_jsii_s_relay_prints_what_its_node_says_as_text_never_as_bytes() -> None:
    """jsii prints each stderr line of its Node that is not its own JSON with print(),
    which showed an end-of-life banner as b'!!!...\\n' lines at every synth."""
    script = (
        "import io\n"
        "from infra.node import prepare_jsii\n"
        "prepare_jsii()\n"
        "from jsii._kernel.providers import process\n"
        "process.stderr_sink(io.BytesIO("
        'b\'!!  Node 20 is end-of-life  !!\\n{"stderr": "b2sK"}\\n\'))\n'
    )
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, timeout=60, check=True
    )
    assert result.stderr == b"!!  Node 20 is end-of-life  !!\nok\n"
