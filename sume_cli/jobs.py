"""Operator actions on one job: read its story, register it for polling, replay it."""

from __future__ import annotations

from sume.polling.registry import Registry
from sume.store.job import MAX_REPLAY_REASON_BYTES, Job, State
from sume.store.jobs import JobsTable
from sume.store.queue import JobQueue
from sume_cli import USAGE, OpsError


def load(jobs: JobsTable, job_id: str) -> Job:
    job = jobs.get(job_id)
    if job is None:
        raise OpsError(f"no job {job_id!r} in the jobs table")
    return job


def parse_metadata(pairs: list[str]) -> dict[str, str]:
    metadata = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise OpsError(f"--metadata {pair!r}: expected KEY=VALUE", USAGE)
        metadata[key.strip()] = value
    return metadata


def expect(
    registry: Registry, jobs: JobsTable, job_id: str, status_url: str, metadata: dict[str, str]
) -> tuple[bool, Job]:
    """Register a submitted job as the application API does; a known job is left as it is.

    ``registry`` is built with the deployment's own ``POLL_INITIAL_SECONDS``, so
    the job is due when that deployment's poller would have made it due. Returns
    whether it was registered now, and the job either way.
    """
    try:
        created = registry.expect(job_id, status_url, metadata or None)
    except ValueError as exc:
        raise OpsError(str(exc), USAGE) from None
    return created, load(jobs, job_id)


def check_reason(reason: str | None) -> str | None:
    """An operator's replay reason, as the item keeps it; a longer one is refused."""
    if reason is None:
        return None
    if len(reason.encode("utf-8", "surrogatepass")) > MAX_REPLAY_REASON_BYTES:
        raise OpsError(f"--reason: at most {MAX_REPLAY_REASON_BYTES} bytes (UTF-8)", USAGE)
    return reason.strip() or None


def replay(
    jobs: JobsTable,
    queue: JobQueue,
    job_id: str,
    now: int,
    sweep_after: int,
    reason: str | None = None,
) -> Job:
    """Make a finished job's follow-up work owed again and queue it; the job as replayed.

    The conditional write comes first: if the send then fails, the item says
    the work is owed and the sweeper queues it; the worker sees ``replay`` and
    copies the artifacts again instead of trusting the ones already stored.
    The replay starts a fresh attempt budget, so a job that gave up, or was
    processed on its last attempt, gets all of them again.
    """
    # If the replay message is lost, the sweeper re-enqueues the job after the
    # stack's sweep delay (``sweep_after``, ``Ops.sweep_after``).
    replayed = jobs.request_replay(job_id, now, now + sweep_after, reason)
    if replayed is None:
        state = load(jobs, job_id).state
        finished = f"{State.PROCESSED.value} or {State.PROCESSING_ERROR.value}"
        raise OpsError(f"job {job_id!r} is {state}: only {finished} jobs can be replayed")
    queue.send(job_id)
    return replayed
