"""One synth per test session (jsii is slow), with no AWS credentials at all.

The cloud assembly is synthesized by a subprocess whose environment carries
no AWS credentials, profile or config, which is itself the proof that synth
works offline and account-free. It starts with the first infra test, and the
infra tests that read no template (the CDK CLI's, the Makefile's, quicktype's,
each waiting on a process of its own) run first, while it synthesizes.
cfn-lint loads beside it and lints the templates in the background while the
template assertions run; the tests that need its findings (``cfn_lint_findings``)
are run last.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from infra import spec
from tests.infra.synth_stages import GLOBAL_STAGE

ROOT = Path(__file__).resolve().parents[2]
STAGES = ("dev", "prod")
# The multi-region stage's stacks (tests.infra.synth_stages.GLOBAL_STAGE), by region.
GLOBAL_REGIONS = ("us-east-1", "us-east-2")
_HASH = re.compile(r"[0-9A-F]{8}$")


def base_name(logical_id: str) -> str:
    """``JobsTable10C8EDF6`` -> ``JobsTable``: logical ids without CDK's hash."""
    return _HASH.sub("", logical_id)


def ref_name(value: Any) -> str:
    """A CloudFormation reference as ``<base logical id><suffix>``, ``*`` for a wildcard."""
    if isinstance(value, str):
        return value
    if "Ref" in value:
        return base_name(value["Ref"])
    if "Fn::GetAtt" in value:
        return base_name(value["Fn::GetAtt"][0])
    if "Fn::Join" in value:
        return "".join(ref_name(part) for part in value["Fn::Join"][1])
    raise AssertionError(f"unexpected reference {value}")


def credential_free_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(
        {
            "HOME": str(home),
            "AWS_CONFIG_FILE": str(home / "no-config"),
            "AWS_SHARED_CREDENTIALS_FILE": str(home / "no-credentials"),
            "AWS_EC2_METADATA_DISABLED": "true",
        }
    )
    # jsii unpacks aws-cdk-lib (~200 MB) into its cache on first use; keep
    # using the caller's cache (jsii's default is under the real home).
    env.setdefault(
        "JSII_RUNTIME_PACKAGE_CACHE_ROOT",
        str(Path.home() / ".cache" / "aws" / "jsii" / "package-cache"),
    )
    return env


@dataclass
class Stage:
    name: str
    template: dict[str, Any]
    metadata: dict[str, Any]
    assets: dict[str, Any]

    def assertions(self) -> Any:
        """The CDK's assertions on this template. The CDK is imported here, on first use:
        importing it starts a jsii runtime, which a worker that only collects the infra
        tier (``make test`` runs it on one) should not pay for."""
        from aws_cdk.assertions import Template

        return Template.from_json(self.template)

    @property
    def resources(self) -> dict[str, dict[str, Any]]:
        resources: dict[str, dict[str, Any]] = self.template["Resources"]
        return resources

    def of_type(self, cfn_type: str) -> dict[str, dict[str, Any]]:
        return {k: r for k, r in self.resources.items() if r["Type"] == cfn_type}

    def one(self, base: str, cfn_type: str) -> tuple[str, dict[str, Any]]:
        found = [(k, r) for k, r in self.of_type(cfn_type).items() if base_name(k) == base]
        assert len(found) == 1, f"{base} ({cfn_type}): {[k for k, _ in found]}"
        return found[0]

    def function(self, name: str) -> dict[str, Any]:
        """The properties of ``Functions/<name>/Function``."""
        _, function = self.one(f"Functions{name}Function", "AWS::Lambda::Function")
        properties: dict[str, Any] = function["Properties"]
        return properties

    def environment(self, name: str) -> dict[str, str]:
        """The function's environment with deploy-time references as plain strings."""
        variables = self.function(name)["Environment"]["Variables"]
        return {
            k: v if isinstance(v, str) else f"resolved-{ref_name(v)}" for k, v in variables.items()
        }

    def permissions(self, name: str) -> dict[str, set[str]]:
        """resource -> actions, across every policy attached to the function's role."""
        role_id, role = self.one(f"Functions{name}Role", "AWS::IAM::Role")
        assert "ManagedPolicyArns" not in role["Properties"]
        assert "Policies" not in role["Properties"]
        granted: dict[str, set[str]] = {}
        for policy in self.of_type("AWS::IAM::Policy").values():
            if {"Ref": role_id} not in policy["Properties"]["Roles"]:
                continue
            for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
                assert statement["Effect"] == "Allow"
                assert "Condition" not in statement
                actions = statement["Action"]
                resources = statement["Resource"]
                for resource in resources if isinstance(resources, list) else [resources]:
                    granted.setdefault(ref_name(resource), set()).update(
                        [actions] if isinstance(actions, str) else actions
                    )
        return granted

    def event_source(self, queue: str) -> dict[str, Any]:
        """The properties of the one event source mapping on ``queue`` (a base name)."""
        (mapping,) = [
            m["Properties"]
            for m in self.of_type("AWS::Lambda::EventSourceMapping").values()
            if ref_name(m["Properties"]["EventSourceArn"]) == queue
        ]
        return mapping

    def alarms(self) -> dict[str, dict[str, Any]]:
        """Alarm properties by construct id (``MonitoringJobsLost`` -> ``JobsLost``)."""
        return {
            base_name(k)[len("Monitoring") :]: r["Properties"]
            for k, r in self.of_type("AWS::CloudWatch::Alarm").items()
        }


# What a function's role may do, by resource (see Stage.permissions).
ITEMS = {"dynamodb:GetItem", "dynamodb:UpdateItem"}
SEND = {"sqs:GetQueueAttributes", "sqs:GetQueueUrl", "sqs:SendMessage"}
CONSUME = {
    "sqs:ChangeMessageVisibility",
    "sqs:DeleteMessage",
    "sqs:GetQueueAttributes",
    "sqs:GetQueueUrl",
    "sqs:ReceiveMessage",
}
SECRET = {"secretsmanager:DescribeSecret", "secretsmanager:GetSecretValue"}


def logs_and_traces(name: str) -> dict[str, set[str]]:
    """What every function may do: write its own log group, send X-Ray traces."""
    return {
        f"Functions{name}Logs": {"logs:CreateLogStream", "logs:PutLogEvents"},
        "*": {"xray:PutTelemetryRecords", "xray:PutTraceSegments"},
    }


@dataclass
class Cloud:
    outdir: Path
    env: dict[str, str]
    stages: dict[str, Stage]
    regional: dict[str, Stage]
    """The multi-region stage's stack in each of its regions."""
    cfn_lint: subprocess.Popen[str]
    templates: dict[str, Stage] = field(default_factory=dict)
    """Each template's file, as cfn-lint names it, and its stage."""
    synth_stderr: str = ""
    """What the synth printed on stderr (jsii relays its Node's there)."""
    _lint_result: list[dict[str, Any]] | None = field(default=None)

    def lint_findings(self) -> list[dict[str, Any]]:
        if self._lint_result is None:
            out, err = self.cfn_lint.communicate(timeout=300)
            assert self.cfn_lint.returncode == 0, err
            self._lint_result = json.loads(out)
        return self._lint_result


def _python(module: str, *args: str, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", module, *args],
        cwd=ROOT,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _artifacts() -> tuple[str, ...]:
    """The assembly's templates by artifact: each stage's, then the global stage's by region."""
    name = spec.stack_name(GLOBAL_STAGE)
    return (*(spec.stack_name(s) for s in STAGES), *(f"{name}-{r}" for r in GLOBAL_REGIONS))


class _Started:
    """The synth, and cfn-lint, which a thread hands the templates once they are written."""

    def __init__(self, outdir: Path, env: dict[str, str]) -> None:
        self.outdir = outdir
        self.env = env
        self.synth = _python("tests.infra.synth_stages", str(outdir), env=env)
        # cfn-lint loads for seconds; on two cores it overlaps with the synth.
        self.lint = _python("tests.infra.lint_templates", env=env)
        self.synth_output = ("", "")
        self._waiting = threading.Thread(target=self._lint_when_synthesized, daemon=True)
        self._waiting.start()

    def _lint_when_synthesized(self) -> None:
        self.synth_output = self.synth.communicate(timeout=600)
        assert self.lint.stdin is not None
        if self.synth.returncode == 0:
            names = [str(self.outdir / f"{a}.template.json") for a in _artifacts()]
            self.lint.stdin.write(" ".join(names) + "\n")
            self.lint.stdin.flush()

    def synthesized(self) -> tuple[str, str]:
        """Waits for the synth; its stdout and stderr."""
        self._waiting.join(timeout=600)
        return self.synth_output

    def stop(self) -> None:
        for process in (self.synth, self.lint):
            if process.poll() is None:
                process.kill()
                process.communicate()


@pytest.fixture(scope="session")
def _started(tmp_path_factory: pytest.TempPathFactory) -> Iterator[_Started]:
    started = _Started(
        tmp_path_factory.mktemp("cdk.out"), credential_free_env(tmp_path_factory.mktemp("home"))
    )
    yield started
    started.stop()


@pytest.fixture(scope="session")
def _synth_needed(request: pytest.FixtureRequest) -> bool:
    return any("cloud" in getattr(item, "fixturenames", ()) for item in request.session.items)


@pytest.fixture(autouse=True)
def _synth_early(request: pytest.FixtureRequest, _synth_needed: bool) -> None:
    """Starts the synth at the first infra test of a session that reads templates."""
    if _synth_needed:
        request.getfixturevalue("_started")


@pytest.fixture(scope="session")
def cloud(_started: _Started) -> Cloud:
    from aws_cdk import App

    App()  # starts this process's jsii runtime, which Template needs
    out, err = _started.synthesized()
    if _started.synth.returncode != 0:
        pytest.fail(f"synth failed:\n{out[-4000:]}\n{err[-8000:]}")
    outdir = _started.outdir

    def read(name: str, artifact: str) -> Stage:
        return Stage(
            name=name,
            template=json.loads((outdir / f"{artifact}.template.json").read_text()),
            metadata=json.loads((outdir / f"{artifact}.metadata.json").read_text()),
            assets=json.loads((outdir / f"{artifact}.assets.json").read_text()),
        )

    stages = {stage: read(spec.stack_name(stage), spec.stack_name(stage)) for stage in STAGES}
    name = spec.stack_name(GLOBAL_STAGE)
    regional = {region: read(name, f"{name}-{region}") for region in GLOBAL_REGIONS}
    files = [str(outdir / f"{artifact}.template.json") for artifact in _artifacts()]
    templates = dict(zip(files, [*stages.values(), *regional.values()], strict=True))
    return Cloud(
        outdir=outdir,
        env=_started.env,
        stages=stages,
        regional=regional,
        cfn_lint=_started.lint,
        templates=templates,
        synth_stderr=err,
    )


@pytest.fixture(scope="session")
def cfn_lint_findings(cloud: Cloud) -> list[dict[str, Any]]:
    """cfn-lint's findings on every template; waits for the background lint."""
    return cloud.lint_findings()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # The synth takes seconds: the infra tests that read no template run first,
    # meanwhile. cfn-lint starts on the templates once the synth is done and
    # takes seconds too: the tests that wait for it run last, the others meanwhile.
    # Stable, so each module's tests stay together (their module fixtures are built once).
    here = Path(__file__).parent
    slots = [n for n, item in enumerate(items) if item.path.is_relative_to(here)]

    def rank(item: pytest.Item) -> int:
        names = getattr(item, "fixturenames", ())
        return 2 if "cfn_lint_findings" in names else 1 if "cloud" in names else 0

    ordered = sorted((items[n] for n in slots), key=rank)
    for n, item in zip(slots, ordered, strict=True):
        items[n] = item


@pytest.fixture(scope="session")
def dev(cloud: Cloud) -> Stage:
    return cloud.stages["dev"]


@pytest.fixture(scope="session")
def prod(cloud: Cloud) -> Stage:
    return cloud.stages["prod"]
