"""The composition root: what each builder asks for, and what ``reset`` forgets."""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from sume import aws, services
from sume.http import request_from_event
from sume.settings import PollerSettings, ReceiverSettings, WorkerSettings
from sume.webhook import Rejected
from tests.builders import SECRET, apigw_event, delivery_event, job_body, raw_of, signed_headers

ROOT = Path(__file__).resolve().parents[2]
ENV = {
    "JOBS_TABLE_NAME": "jobs",
    "JOBS_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/jobs",
    "PAYLOADS_BUCKET_NAME": "payloads",
    "ARTIFACTS_BUCKET_NAME": "artifacts",
    "EVENT_BUS_NAME": "bus",
    "SUME_COM_WEBHOOK_SIGNING_SECRET": SECRET,
}
SECRET_ARN = "arn:aws:secretsmanager:us-east-1:123456789012:secret:sume-AbCdEf"


class Clients:
    """Records which clients a builder asks for; hands out stand-ins never called."""

    def __init__(self) -> None:
        self.made: list[tuple[str, bool]] = []

    def __call__(self, service: str, patient: bool = False) -> object:
        self.made.append((service, patient))
        return object()


def test_a_receiver_makes_no_client_for_a_request_it_refuses_or_a_ping():
    clients = Clients()
    receiver = services.build_receiver(ReceiverSettings.from_env(ENV), clients)
    raw = raw_of(job_body("job_forged"))
    with pytest.raises(Rejected):
        receiver.receive(request_from_event(apigw_event(raw, signed_headers(raw, ["guess"]))))
    ping = delivery_event({"event": "webhook.test", "request_id": "r"})
    assert receiver.receive(request_from_event(ping)).result == "test"
    assert clients.made == []


def test_a_receiver_with_a_secret_arn_makes_only_the_secrets_client_up_front():
    clients = Clients()
    env = {**ENV, "SIGNING_SECRET_ARN": SECRET_ARN}
    services.build_receiver(ReceiverSettings.from_env(env), clients)
    assert clients.made == [("secretsmanager", False)]


def test_the_worker_waits_longer_on_aws_than_the_receiver_and_the_poller():
    worker, poller, intake = Clients(), Clients(), Clients()
    services.build_worker(WorkerSettings.from_env(ENV), worker)
    services.build_poller(PollerSettings.from_env(ENV), poller)
    services.build_intake(ReceiverSettings.from_env(ENV), intake)
    assert set(worker.made) == {("s3", True), ("dynamodb", True), ("events", True)}
    assert set(poller.made) == {("dynamodb", False), ("sqs", False)}
    assert set(intake.made) == {("dynamodb", False), ("sqs", False)}


def test_reset_forgets_the_services_their_settings_and_the_clients(monkeypatch):
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    services.reset()
    receiver, sqs = services.receiver_service(), aws.client("sqs")
    assert services.receiver_service() is receiver
    assert aws.client("sqs") is sqs

    monkeypatch.setenv("MAX_BODY_BYTES", "10")
    raw = raw_of(job_body("job_big"))
    big = apigw_event(raw, signed_headers(raw, ["guess"]))
    # Still the container's service, with the settings it was built with.
    with pytest.raises(Rejected) as refused:
        services.receiver_service().receive(request_from_event(big))
    assert refused.value.status == 401

    services.reset()
    assert services.receiver_service() is not receiver
    assert aws.client("sqs") is not sqs
    with pytest.raises(Rejected) as refused:
        services.receiver_service().receive(request_from_event(big))
    assert refused.value.status == 413
    services.reset()


def test_a_client_pools_a_connection_for_every_thread_that_shares_it():
    # The poller's polls share its clients, a copy's part uploads the worker's
    # S3 client: a pool smaller than them opens, and discards with a warning,
    # a connection per call over its size.
    threads = max(
        PollerSettings.from_env(ENV).max_parallel_polls,
        WorkerSettings.from_env(ENV).artifact_uploads,
    )
    aws.reset()
    pools = {
        aws.client("dynamodb", patient).meta.config.max_pool_connections
        for patient in (False, True)
    }
    aws.reset()
    assert min(pools) >= threads


@pytest.mark.parametrize(
    ("handler", "settings", "foreign"),
    [
        ("receiver", "ReceiverSettings", {"sume.processing", "sume.polling", "sume.fetch"}),
        ("worker", "WorkerSettings", {"sume.webhook", "sume.polling", "sume.intake"}),
        ("poller", "PollerSettings", {"sume.webhook", "sume.processing", "sume.artifacts"}),
    ],
)
def test_a_handler_imports_all_its_service_needs_and_nothing_of_the_others(
    handler, settings, foreign
):
    # Lambda's init phase imports the handler; building the service on the
    # first invocation then loads none of our code, and no other handler's.
    script = textwrap.dedent(
        """
        import json, sys
        sys.path[:0] = [{root!r}, {functions!r}]
        import {handler}
        from sume import services, settings
        imported = set(sys.modules)
        read = getattr(settings, {settings!r}).from_env(json.loads(sys.argv[1]))
        getattr(services, "build_" + {handler!r})(read, lambda service, patient=False: None)
        print(json.dumps([sorted(imported), sorted(set(sys.modules) - imported)]))
        """
    ).format(root=str(ROOT), functions=str(ROOT / "functions"), handler=handler, settings=settings)
    out = subprocess.run(
        [sys.executable, "-c", script, json.dumps(ENV)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    imported, built = json.loads(out.stdout)
    assert [name for name in built if name.startswith("sume")] == []
    assert not foreign & set(imported)
