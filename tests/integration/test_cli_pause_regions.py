"""``pause`` and ``resume`` of a stage deployed in two regions, on moto's server: each
region's stack with its outputs, its poller naming the other (``PEER_REGION``), and its
switches. A pause holds in both regions: neither region's sweeper moves the other's
owed jobs to a worker that runs (docs/regions.md, "Pausing both regions")."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import pytest

from devstack import switches
from devstack.resources import create_resources
from devstack.switches import create_switches
from infra import spec
from infra.spec import ResourceNames
from sume.core.names import Env
from sume_cli.main import main
from tests.integration.conftest import stop_shared_stacks
from tests.integration.test_cli import reset

REGIONS = ("us-east-2", "us-west-2")
STAGE = "duo"


def deploy(endpoint: str, region: str, names: ResourceNames, peer: str) -> None:
    """The stage's stack in ``region``: its outputs, and its poller naming ``peer``."""
    clients = {s: boto3.client(s, endpoint_url=endpoint, region_name=region) for s in ("iam",)}
    role = clients["iam"].create_role(
        RoleName=f"poller-{STAGE}-{region}", AssumeRolePolicyDocument="{}"
    )
    env = {Env.JOBS_TABLE_NAME: names.table, Env.PEER_REGION: peer}
    functions = {
        f"Functions{name}Function1A2B3C4D": {
            "Type": "AWS::Lambda::Function",
            "Properties": {
                "Handler": f"{name.lower()}.handler",
                "Runtime": "python3.13",
                "Role": role["Role"]["Arn"],
                "Code": {"ZipFile": "def handler(event, context): pass"},
                "Environment": {"Variables": env if name == "Poller" else {}},
            },
        }
        for name in ("Worker", "Poller")
    }
    outputs = {spec.OUTPUTS[f]: v for f, v in vars(names).items() if v is not None}
    outputs[spec.OUTPUT_WEBHOOK_URL] = f"https://{region}.hooks.example/webhooks/sume"
    template = {
        "Resources": functions,
        "Outputs": {key: {"Value": value} for key, value in outputs.items()},
    }
    boto3.client("cloudformation", endpoint_url=endpoint, region_name=region).create_stack(
        StackName=spec.stack_name(STAGE), TemplateBody=json.dumps(template)
    )


@pytest.fixture
def duo(
    moto_server: str, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> Iterator[dict[str, Callable[..., Any]]]:
    """Both regions deployed; each region's clients, by region."""
    # moto's state is the process's: a running local stack would be wiped by the reset.
    stop_shared_stacks()
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_server)
    monkeypatch.delenv("SUME_COM_WEBHOOK_SIGNING_SECRET", raising=False)
    reset(moto_server)
    request.addfinalizer(lambda: reset(moto_server))
    switches.install()
    clients: dict[str, Callable[..., Any]] = {}
    for region, peer in (REGIONS, tuple(reversed(REGIONS))):
        session = boto3.session.Session(region_name=region)

        def client(service: str, session: Any = session) -> Any:
            return session.client(service, endpoint_url=moto_server)

        names = create_resources(session, prefix=f"duo-{region}", endpoint_url=moto_server)
        create_switches(client, names, f"duo-{region}")
        deploy(moto_server, region, names, peer)
        clients[region] = client
    yield clients


def worker_state(client: Callable[[str], Any], region: str) -> str:
    (mapping,) = [
        m
        for m in client("lambda").list_event_source_mappings()["EventSourceMappings"]
        if m["EventSourceArn"].endswith(f":duo-{region}-jobs")
    ]
    return str(mapping["State"])


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["--stage", STAGE, "--region", REGIONS[0], *argv])
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    return code, captured.out, captured.err


def test_a_pause_turns_both_regions_worker_off_and_resume_both_on(duo, capsys):
    code, out, err = run(capsys, "pause", "worker", "--reason", "artifact origin down")
    assert code == 0, err
    turned = {region: worker_state(duo[region], region) for region in REGIONS}
    assert turned == dict.fromkeys(REGIONS, "Disabled")
    assert "also paused in us-west-2 (the stage's other region)" in out
    # Each region's record says who, since when and why: report in either says so.
    for region in REGIONS:
        value = duo[region]("ssm").get_parameter(Name=f"/SumeWebhooks-{STAGE}/paused/worker")
        assert json.loads(value["Parameter"]["Value"])["reason"] == "artifact origin down"
    code, out, err = run(capsys, "pause", "worker", "--reason", "again", "--output", "json")
    told = json.loads(out)
    assert (code, told["changed"], told["reason"]) == (0, [], "artifact origin down")
    assert [(r["region"], r["paused"]) for r in told["other_regions"]] == [("us-west-2", True)]

    code, out, err = run(capsys, "resume", "worker")
    assert code == 0, err
    assert "also resumed in us-west-2" in out
    turned = {region: worker_state(duo[region], region) for region in REGIONS}
    assert turned == dict.fromkeys(REGIONS, "Enabled")
    for region in REGIONS:
        ssm = duo[region]("ssm")
        assert (
            ssm.get_parameters(Names=[f"/SumeWebhooks-{STAGE}/paused/worker"])["Parameters"] == []
        )


def test_a_region_that_cannot_be_paused_is_named_and_the_pause_exits_3(duo, capsys):
    # The other region's stack is gone (or its API refuses): this region pauses, and
    # the command says where the pause does not hold.
    duo[REGIONS[1]]("cloudformation").delete_stack(StackName=spec.stack_name(STAGE))
    code, _, err = run(capsys, "pause", "worker", "--reason", "origin down")
    assert code == 3
    assert worker_state(duo[REGIONS[0]], REGIONS[0]) == "Disabled"
    assert "not paused in us-west-2: " in err
    assert "its poller may sweep this region's owed jobs to a worker that runs" in err
    code, _, err = run(capsys, "resume", "worker")
    assert code == 3
    assert "not resumed in us-west-2: " in err and "its work stays paused there" in err
    assert worker_state(duo[REGIONS[0]], REGIONS[0]) == "Enabled"
