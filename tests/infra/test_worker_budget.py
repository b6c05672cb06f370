"""The worker's time, size and memory, chosen together (the arithmetic is in ``infra/spec.py``):
the deployed defaults must keep agreeing with one another."""

from bench.artifacts import FRAMING_PER_UPLOAD
from infra import spec
from infra.spec import WORKER_MEMORY_MB, WORKER_TIMEOUT
from sume.working.settings import WorkerSettings
from tests.infra.conftest import Stage

MiB = 1024 * 1024
# C in infra/spec.py's arithmetic: what comes before the first copy (the claim,
# reading the event), at most.
CLAIM_SECONDS = 10
DEFAULTS = WorkerSettings.from_env(
    {
        "JOBS_TABLE_NAME": "t",
        "JOBS_QUEUE_URL": "q",
        "ARTIFACTS_BUCKET_NAME": "a",
        "EVENT_BUS_NAME": "e",
        **spec.worker_queue_environment(),
    }
)


def test_one_artifact_s_fetch_and_the_finish_fit_the_function_s_timeout():
    used = DEFAULTS.total_timeout_seconds + DEFAULTS.time_reserve_seconds
    assert used + CLAIM_SECONDS <= WORKER_TIMEOUT


def test_every_artifact_under_the_cap_fits_one_fetch_at_the_planned_rate():
    # Else one would be refused as too_large_for_invocation while under MAX_ARTIFACT_BYTES.
    largest = DEFAULTS.artifact_planned_bytes_per_second * DEFAULTS.total_timeout_seconds
    assert DEFAULTS.max_artifact_bytes <= largest


def test_a_claim_outlasts_the_invocation_that_took_it():
    assert DEFAULTS.lease_seconds > WORKER_TIMEOUT


def test_a_copy_s_parts_take_a_small_share_of_the_worker_s_memory():
    parts = DEFAULTS.artifact_connections + DEFAULTS.artifact_uploads
    held = parts * DEFAULTS.part_size_bytes + DEFAULTS.artifact_uploads * FRAMING_PER_UPLOAD
    assert held <= WORKER_MEMORY_MB * MiB / 4


def test_the_stack_deploys_the_worker_s_timeout_and_memory(dev: Stage) -> None:
    worker = dev.function("Worker")
    assert (worker["Timeout"], worker["MemorySize"]) == (WORKER_TIMEOUT, WORKER_MEMORY_MB)
