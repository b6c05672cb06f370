"""The composition root: what each builder asks for, and what ``reset`` forgets."""

import pytest

from sume.core import aws, runtime
from sume.polling.compose import build_poller
from sume.polling.settings import PollerSettings
from sume.receiving.compose import build_receiver, receiver_service
from sume.receiving.http import request_from_event
from sume.receiving.settings import ReceiverSettings
from sume.receiving.webhook import Rejected
from sume.store.compose import build_intake
from sume.working.compose import build_worker
from sume.working.settings import WorkerSettings
from tests.builders import SECRET, apigw_event, delivery_event, job_body, raw_of, signed_headers

ENV = {
    "JOBS_TABLE_NAME": "jobs",
    "JOBS_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/jobs",
    "PAYLOADS_BUCKET_NAME": "payloads",
    "ARTIFACTS_BUCKET_NAME": "artifacts",
    "EVENT_BUS_NAME": "bus",
    "SUME_COM_WEBHOOK_SIGNING_SECRET": SECRET,
    "MAX_RECEIVES": "5",
    "QUEUE_RETRY_SECONDS": "1800",
    "DLQ_RETENTION_SECONDS": "1209600",
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
    receiver = build_receiver(ReceiverSettings.from_env(ENV), clients)
    raw = raw_of(job_body("job_forged"))
    with pytest.raises(Rejected):
        receiver.receive(request_from_event(apigw_event(raw, signed_headers(raw, ["guess"]))))
    ping = delivery_event({"event": "webhook.test", "request_id": "r"})
    assert receiver.receive(request_from_event(ping)).result == "test"
    assert clients.made == []


def test_a_receiver_with_a_secret_arn_makes_only_the_secrets_client_up_front():
    clients = Clients()
    env = {**ENV, "SIGNING_SECRET_ARN": SECRET_ARN}
    build_receiver(ReceiverSettings.from_env(env), clients)
    assert clients.made == [("secretsmanager", False)]


def test_the_worker_waits_longer_on_aws_than_the_receiver_and_the_poller():
    worker, poller, intake = Clients(), Clients(), Clients()
    build_worker(WorkerSettings.from_env(ENV), worker)
    build_poller(PollerSettings.from_env(ENV), poller)
    build_intake(ReceiverSettings.from_env(ENV), intake)
    assert set(worker.made) == {("s3", True), ("dynamodb", True), ("events", True)}
    assert set(poller.made) == {("dynamodb", False), ("sqs", False), ("events", False)}
    assert set(intake.made) == {("dynamodb", False), ("sqs", False)}


def test_reset_forgets_the_services_their_settings_and_the_clients(monkeypatch):
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    runtime.reset()
    receiver, sqs = receiver_service(), aws.client("sqs")
    assert receiver_service() is receiver
    assert aws.client("sqs") is sqs

    monkeypatch.setenv("MAX_BODY_BYTES", "10")
    raw = raw_of(job_body("job_big"))
    big = apigw_event(raw, signed_headers(raw, ["guess"]))
    # Still the container's service, with the settings it was built with.
    with pytest.raises(Rejected) as refused:
        receiver_service().receive(request_from_event(big))
    assert refused.value.status == 401

    runtime.reset()
    assert receiver_service() is not receiver
    assert aws.client("sqs") is not sqs
    with pytest.raises(Rejected) as refused:
        receiver_service().receive(request_from_event(big))
    assert refused.value.status == 413
    runtime.reset()


def test_a_client_pools_a_connection_for_every_thread_that_shares_it():
    # The poller's polls share its clients, a copy's part uploads the worker's
    # S3 client: a pool smaller than them opens, and discards with a warning,
    # a connection per call over its size.
    threads = max(
        PollerSettings.from_env(ENV).max_parallel_polls,
        WorkerSettings.from_env(ENV).artifact_uploads,
    )
    runtime.reset()
    pools = {
        aws.client("dynamodb", patient).meta.config.max_pool_connections
        for patient in (False, True)
    }
    runtime.reset()
    assert min(pools) >= threads
