import re
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

from sume.core.errors import ConfigurationError
from sume.polling.fanout import groups
from sume.polling.settings import (
    ExpirySettings,
    FanOutSettings,
    PollerSettings,
    RegistrySettings,
)
from sume.receiving.settings import ReceiverSettings
from sume.working.settings import WorkerSettings

BASE = {"JOBS_TABLE_NAME": "t", "JOBS_QUEUE_URL": "q", "SUME_COM_WEBHOOK_SIGNING_SECRET": "s"}


def test_defaults():
    s = ReceiverSettings.from_env(BASE)
    assert s.signature_tolerance_seconds == 300
    assert s.max_body_bytes == 1024 * 1024
    assert s.table.due_shards == 16
    assert s.payloads_bucket_name is None


def test_overrides():
    s = ReceiverSettings.from_env(
        {**BASE, "MAX_BODY_BYTES": "10", "SIGNATURE_TOLERANCE_SECONDS": "60"}
    )
    assert (s.max_body_bytes, s.signature_tolerance_seconds) == (10, 60)


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({**BASE, "JOBS_TABLE_NAME": ""}, "JOBS_TABLE_NAME"),
        ({k: v for k, v in BASE.items() if k != "JOBS_QUEUE_URL"}, "JOBS_QUEUE_URL"),
        ({**BASE, "SUME_COM_WEBHOOK_SIGNING_SECRET": " "}, "SIGNING_SECRET_ARN"),
        ({**BASE, "MAX_BODY_BYTES": "lots"}, "MAX_BODY_BYTES"),
        ({**BASE, "MAX_BODY_BYTES": "0"}, "MAX_BODY_BYTES"),
    ],
)
def test_misconfiguration_names_the_variable(env, message):
    with pytest.raises(ConfigurationError, match=message):
        ReceiverSettings.from_env(env)


WORKER = {
    "JOBS_TABLE_NAME": "t",
    "JOBS_QUEUE_URL": "q",
    "ARTIFACTS_BUCKET_NAME": "a",
    "EVENT_BUS_NAME": "e",
    "MAX_RECEIVES": "3",
    "QUEUE_RETRY_SECONDS": "60",
    "DLQ_RETENTION_SECONDS": "86400",
}


def test_the_worker_s_attempt_budget_is_its_queue_s_receives_unless_set():
    s = WorkerSettings.from_env(WORKER)
    assert (s.max_receives, s.max_attempts) == (3, 3)
    assert (s.queue_retry_seconds, s.dlq_retention_seconds) == (60, 86400)
    assert WorkerSettings.from_env({**WORKER, "MAX_ATTEMPTS": "7"}).max_attempts == 7


@pytest.mark.parametrize("name", ["MAX_RECEIVES", "QUEUE_RETRY_SECONDS", "DLQ_RETENTION_SECONDS"])
def test_the_worker_must_be_told_its_queue(name):
    with pytest.raises(ConfigurationError, match=f"{name} must be set"):
        WorkerSettings.from_env({k: v for k, v in WORKER.items() if k != name})
    with pytest.raises(ConfigurationError, match=f"{name} must be within"):
        WorkerSettings.from_env({**WORKER, name: "0"})


FANOUT = {
    "POLL_SHARDS_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/x-PollShards1A",
    "SHARD_LEASES_TABLE_NAME": "leases",
}


def test_a_round_reads_the_larger_shard_count_while_a_lowered_one_drains():
    default = FanOutSettings.from_env(FANOUT)
    assert (default.read_shards, default.shards_per_run) == (16, 1)
    lowered = FanOutSettings.from_env({**FANOUT, "DUE_SHARDS": "8", "DUE_SHARDS_PREVIOUS": "16"})
    raised = FanOutSettings.from_env({**FANOUT, "DUE_SHARDS": "32", "DUE_SHARDS_PREVIOUS": "16"})
    assert (lowered.read_shards, raised.read_shards) == (16, 32)
    assert groups(16, 1) == [(s,) for s in range(16)]
    assert groups(10, 4) == [(0, 1, 2, 3), (4, 5, 6, 7), (8, 9)]


def test_shard_assignments_are_told_from_registrations_by_their_queue():
    settings = FanOutSettings.from_env(FANOUT)
    assert settings.is_shards_queue("arn:aws:sqs:us-east-1:123456789012:x-PollShards1A")
    assert not settings.is_shards_queue("arn:aws:sqs:us-east-1:123456789012:x-Registrations")
    assert not settings.is_shards_queue("")


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"SHARD_LEASES_TABLE_NAME": "l"}, "POLL_SHARDS_QUEUE_URL"),
        ({"POLL_SHARDS_QUEUE_URL": "q"}, "SHARD_LEASES_TABLE_NAME"),
        ({**FANOUT, "POLL_SHARDS_PER_RUN": "0"}, "POLL_SHARDS_PER_RUN"),
        ({**FANOUT, "DUE_SHARDS_PREVIOUS": "many"}, "DUE_SHARDS_PREVIOUS"),
    ],
)
def test_a_round_without_its_resources_or_with_bad_counts_fails_naming_the_variable(env, message):
    with pytest.raises(ConfigurationError, match=message):
        FanOutSettings.from_env(env)


ROOT = Path(__file__).resolve().parents[2]
POLLER = {**BASE, **FANOUT}
READERS: dict[str, tuple[dict[str, str], list[Callable[[Mapping[str, str]], object]]]] = {
    "docs/receiver.md": (BASE, [ReceiverSettings.from_env]),
    "docs/worker.md": (WORKER, [WorkerSettings.from_env]),
    "docs/poller.md": (
        POLLER,
        [
            PollerSettings.from_env,
            FanOutSettings.from_env,
            RegistrySettings.from_env,
            ExpirySettings.from_env,
        ],
    ),
}


def documented_ranges(doc: str) -> list[tuple[str, str]]:
    """(variable, range) of each row of the doc's environment table with a range."""
    rows = []
    for line in (ROOT / doc).read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| `") and len(cells) == 4 and cells[2]:
            rows += [(name, cells[2]) for name in re.findall(r"`([A-Z_]+)`", cells[0])]
    return rows


def probes(documented: str) -> tuple[list[str], list[str]]:
    """Values a documented range accepts, and values just outside it."""
    if documented.startswith("(0, "):
        top = documented.removeprefix("(0, ").removesuffix("]")
        return ["0.001", top], ["0", "-1", f"{top}.5", "nan", "inf"]
    bounds = re.match(r"(\d+)\.\.(\d+)", documented)
    assert bounds, documented
    low, high = int(bounds[1]), int(bounds[2])
    return [str(low), str(high)], [str(low - 1), str(high + 1), "x"]


@pytest.mark.parametrize("doc", sorted(READERS))
def test_every_documented_range_is_the_one_the_functions_enforce(doc):
    env, readers = READERS[doc]
    rows = documented_ranges(doc)
    assert len(rows) >= 6, rows
    for name, documented in rows:
        accepted, refused = probes(documented)
        for value in accepted:
            for read in readers:
                read({**env, name: value})
        for value in refused:
            with pytest.raises(ConfigurationError, match=name):
                for read in readers:
                    read({**env, name: value})
