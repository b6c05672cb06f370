"""``pause`` and ``resume`` against the local stack: the switches in moto, the record, and
what ``status`` and ``report`` say while the work is paused."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from devstack import switches
from devstack.resources import create_resources
from devstack.stack import DevStack
from devstack.switches import create_switches
from sume_cli import pause
from sume_cli.context import new_session
from sume_cli.main import main
from tests.integration.conftest import SharedStack, stop_shared_stacks
from tests.integration.test_cli import deploy_outputs, reset


@pytest.fixture
def stack(shared_stack: SharedStack) -> Iterator[DevStack]:
    """The module's stack; each test must hand it back running, with no pause record."""
    running = shared_stack.get()
    yield running
    assert set(mapping_states(running).values()) == {"Enabled"}
    assert rule_state(running) == "ENABLED"
    records = running.client("ssm").get_parameters_by_path(Path=f"/{running.prefix}/paused")
    assert records["Parameters"] == []


def cli(stack: DevStack, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["--endpoint-url", stack.endpoint_url, "--prefix", stack.prefix, *argv])
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    return code, captured.out, captured.err


# What is paused is said whatever the window: half an hour reads the report index's
# 16 buckets of one day (or two), not the default 24 h's two or three days of them.
REPORT = ("report", "--since", "30m")


def mapping_states(stack: DevStack) -> dict[str, str]:
    """Each queue's mapping state, by the queue's name, as moto keeps it."""
    states = {}
    for mapping in stack.client("lambda").list_event_source_mappings()["EventSourceMappings"]:
        queue = mapping["EventSourceArn"].rsplit(":", 1)[-1]
        if queue.startswith(stack.prefix):
            states[queue.removeprefix(stack.prefix + "-")] = mapping["State"]
    return states


def rule_state(stack: DevStack) -> str:
    rule = stack.client("events").describe_rule(Name=f"{stack.prefix}-poller-schedule")
    return str(rule["State"])


def test_pause_the_worker_twice_then_resume_twice(stack, capsys):
    code, out, _ = cli(stack, capsys, "pause", "worker", "--reason", "origin down, INC-7")
    assert code == 0
    assert "worker paused since " in out and ": origin down, INC-7; resume: " in out
    assert "resume worker" in out
    assert mapping_states(stack)["jobs"] == "Disabled"
    # Intake goes on; the rest of the poller is untouched.
    assert mapping_states(stack)["registrations"] == "Enabled"
    assert rule_state(stack) == "ENABLED"
    code, first, _ = cli(stack, capsys, "pause", "worker", "--reason", "x", "--json")
    assert code == 0
    told = json.loads(first)
    assert (told["paused"], told["changed"], told["reason"]) == (True, [], "origin down, INC-7")

    code, out, _ = cli(stack, capsys, "resume", "worker")
    assert code == 0
    assert out.startswith("worker resumed after 0m (origin down, INC-7); 0 job(s) waiting")
    assert mapping_states(stack)["jobs"] == "Enabled"
    code, out, _ = cli(stack, capsys, "resume", "worker")
    assert (code, out) == (0, "worker is not paused: nothing to resume\n")


def test_resume_counts_what_waited_not_what_is_left_once_the_worker_reads(
    stack, capsys, monkeypatch
):
    job_ids = [f"job_held_{n}_{uuid.uuid4().hex[:8]}" for n in range(2)]
    assert cli(stack, capsys, "pause", "worker", "--reason", "origin down")[0] == 0
    for job_id in job_ids:
        code, out, _ = cli(stack, capsys, "send-test", stack.url, "--job", job_id)
        assert code == 0, out
    turn_all = pause.turn_all

    def turn_then_read(ops, switches, on):
        turned = turn_all(ops, switches, on)
        # The worker's first batch, in flight the moment its mapping is on (as Lambda's
        # poller may be): it leaves the queue's visible count, then comes back.
        stack.client("sqs").receive_message(
            QueueUrl=stack.names.queue_url, MaxNumberOfMessages=10, VisibilityTimeout=1
        )
        return turned

    # The same job's message twice (a resend, or a sweep while paused): jobs, not
    # messages, are what waits.
    stack.client("sqs").send_message(QueueUrl=stack.names.queue_url, MessageBody=job_ids[0])
    monkeypatch.setattr(pause, "turn_all", turn_then_read)
    code, out, _ = cli(stack, capsys, "resume", "worker")
    assert code == 0
    assert out.startswith(
        "worker resumed after 0m (origin down); 2 job(s) waiting (3 message(s) in "
    )


def test_pausing_the_poller_stops_its_schedule_and_its_round_not_its_intake(stack, capsys):
    code, out, _ = cli(stack, capsys, "pause", "poller", "--reason", "Sume API down", "--json")
    assert code == 0, out
    deployment = ["--endpoint-url", stack.endpoint_url, "--prefix", stack.prefix]
    assert json.loads(out)["resume"] == ["sume-webhooks", *deployment, "resume", "poller"]
    assert (rule_state(stack), mapping_states(stack)["poll-shards"]) == ("DISABLED", "Disabled")
    assert mapping_states(stack)["registrations"] == "Enabled"
    assert mapping_states(stack)["jobs"] == "Enabled"
    code, out, _ = cli(stack, capsys, "resume", "poller", "--json")
    assert code == 0
    told = json.loads(out)
    assert (told["paused"], told["resume"]) == (False, None)
    assert [s["state"] for s in told["switches"]] == ["ENABLED", "Enabled"]
    assert (rule_state(stack), mapping_states(stack)["poll-shards"]) == ("ENABLED", "Enabled")


def test_status_and_report_say_what_is_paused_since_when_and_why(stack, capsys):
    code, out, _ = cli(stack, capsys, "send-test", stack.url, "--job", "job_seen_held")
    assert code == 0, out
    code, out, err = cli(stack, capsys, *REPORT, "--check")
    assert (code, err.count("paused")) == (0, 0)

    cli(stack, capsys, "pause", "worker", "--reason", "consumer broken")
    code, out, err = cli(stack, capsys, "status", "job_seen_held")
    assert code == 0
    assert "job_seen_held" in out and "paused" not in out
    assert "paused: worker paused since " in err and ": consumer broken; resume: " in err

    code, out, err = cli(stack, capsys, *REPORT, "--check")
    assert code == 3
    assert "paused: worker paused since " in err
    assert "check failed: worker paused (next: the commands above)" in err
    assert f"  next: sume-webhooks --endpoint-url {stack.endpoint_url} " in out
    code, out, _ = cli(stack, capsys, *REPORT, "--output", "json")
    body = json.loads(out)
    assert body["problems"] == ["paused worker"]
    (paused,) = body["paused"]
    assert (paused["work"], paused["reason"]) == ("worker", "consumer broken")
    assert paused["since"].endswith("Z") and paused["by"]

    cli(stack, capsys, "resume", "worker")
    code, out, err = cli(stack, capsys, *REPORT, "--check")
    assert (code, err.count("paused")) == (0, 0)


def test_a_switch_turned_by_hand_is_seen_and_resumed(stack, capsys):
    lambda_ = stack.client("lambda")
    (mapping,) = [
        m
        for m in lambda_.list_event_source_mappings()["EventSourceMappings"]
        if m["EventSourceArn"].endswith(f":{stack.prefix}-jobs")
    ]
    lambda_.update_event_source_mapping(UUID=mapping["UUID"], Enabled=False)
    code, _, err = cli(stack, capsys, *REPORT)
    assert code == 0
    assert "worker paused by hand (no record of when or why)" in err
    code, out, _ = cli(stack, capsys, "resume", "worker")
    assert code == 0
    assert out.startswith("worker resumed (it was paused by hand, no record of when or why)")

    # Resumed by hand, with the record still there: resume says so and removes it.
    cli(stack, capsys, "pause", "worker", "--reason", "planned")
    lambda_.update_event_source_mapping(UUID=mapping["UUID"], Enabled=True)
    code, _, err = cli(stack, capsys, *REPORT)
    assert "paused" not in err
    code, out, _ = cli(stack, capsys, "resume", "worker")
    assert out.startswith("worker was running already (resumed by hand): removed its pause record")
    code, out, _ = cli(stack, capsys, "pause", "worker", "--reason", "again", "--json")
    assert json.loads(out)["reason"] == "again"
    cli(stack, capsys, "resume", "worker")

    # Resumed by hand, then paused again: the new pause writes its own record.
    cli(stack, capsys, "pause", "worker", "--reason", "first cause")
    lambda_.update_event_source_mapping(UUID=mapping["UUID"], Enabled=True)
    code, out, _ = cli(stack, capsys, "pause", "worker", "--reason", "second cause", "--json")
    told = json.loads(out)
    assert (code, told["paused"], told["reason"]) == (0, True, "second cause")
    code, _, err = cli(stack, capsys, *REPORT)
    assert ": second cause; resume: " in err and "first cause" not in err
    cli(stack, capsys, "resume", "worker")

    # A record not as the CLI writes it is named, not guessed from.
    name = f"/{stack.prefix}/paused/worker"
    stack.client("ssm").put_parameter(Name=name, Value="{not json", Type="String")
    lambda_.update_event_source_mapping(UUID=mapping["UUID"], Enabled=False)
    code, _, err = cli(stack, capsys, *REPORT)
    assert f"worker paused since ? by unknown: unreadable record {name}; resume: " in err
    assert cli(stack, capsys, "resume", "worker")[0] == 0
    assert stack.client("ssm").get_parameters(Names=[name])["Parameters"] == []


USAGE_ERRORS = [
    (["pause", "worker"], "the following arguments are required: --reason"),
    (["pause", "receiver", "--reason", "x"], "invalid choice: 'receiver'"),
    (["pause", "worker", "--reason", "   "], "--reason: say why"),
    (["pause", "worker", "--reason", "x" * 2000], "--reason: at most"),
    (["resume"], "the following arguments are required: WORK"),
]


def test_usage_errors_exit_2_and_turn_nothing(stack, capsys):
    for argv, says in USAGE_ERRORS:
        code, _, err = cli(stack, capsys, *argv)
        assert (code, says in err) == (2, True), (argv, err)
    assert set(mapping_states(stack).values()) == {"Enabled"}
    assert rule_state(stack) == "ENABLED"


def test_a_stack_without_the_switches_is_a_one_line_error(local_stack, capsys):
    stack = local_stack  # of its own: it deletes a switch
    lambda_: Any = stack.client("lambda")
    for mapping in lambda_.list_event_source_mappings()["EventSourceMappings"]:
        if mapping["EventSourceArn"].endswith(f":{stack.prefix}-jobs"):
            lambda_.delete_event_source_mapping(UUID=mapping["UUID"])
    code, _, err = cli(stack, capsys, "pause", "worker", "--reason", "x")
    assert code == 1
    assert err.startswith("sume-webhooks: no event source mapping reads ")
    assert err.count("\n") == 1
    code, _, err = cli(stack, capsys, *REPORT)
    assert code == 0
    assert "could not tell whether the work is paused: no event source mapping" in err


def test_a_deployed_stage_is_paused_through_its_stack_outputs(
    moto_server: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> None:
    # The stage's stack as CloudFormation describes it; the switches found from its
    # queues, the record named after the stack.
    # moto's state is the process's: the reset would wipe a running local stack too.
    # It stops before the environment is patched: stopping puts back the variables the
    # stack set, and a patch made while it ran would put its endpoint back afterwards.
    stop_shared_stacks()
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_server)
    monkeypatch.delenv("SUME_COM_WEBHOOK_SIGNING_SECRET", raising=False)
    reset(moto_server)  # the session's server: other tests' resources, and ours after
    request.addfinalizer(lambda: reset(moto_server))
    switches.install()
    session = new_session()
    names = create_resources(session, prefix="stage-qa", endpoint_url=moto_server)
    create_switches(
        lambda service: session.client(service, endpoint_url=moto_server), names, "stage-qa"
    )
    deploy_outputs(moto_server, "qa", names, "https://hooks.example/webhooks/sume")

    def run(*argv: str) -> tuple[int, str, str]:
        capsys.readouterr()
        code = main(["--stage", "qa", *argv])
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    code, out, _ = run("pause", "poller", "--reason", "Sume API down")
    assert code == 0, out
    assert out.endswith("; resume: sume-webhooks --stage qa resume poller\n")
    ssm = session.client("ssm", endpoint_url=moto_server)
    record = json.loads(
        ssm.get_parameter(Name="/SumeWebhooks-qa/paused/poller")["Parameter"]["Value"]
    )
    assert record["reason"] == "Sume API down"
    code, _, err = run(*REPORT, "--check")
    assert code == 3
    assert "check failed: poller paused (next: the commands above)" in err
    assert run("resume", "poller")[0] == 0
    assert ssm.get_parameters(Names=["/SumeWebhooks-qa/paused/poller"])["Parameters"] == []
