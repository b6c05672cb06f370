"""How a job ended: the ending settled before its announcement, and what the finish writes."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from sume.contract.envelope import TERMINAL_EVENTS, JobEvent
from sume.core.bounded import stored_error
from sume.store.job import Job, JobAttr
from sume.working.progress import Progress


@dataclass(frozen=True)
class Announced:
    """The ending a claim settled on before announcing it (``Job.announced``).

    Written before the announcement goes out, so a retry of the same
    ``sequence`` (after a crash, or a finish that failed) announces this ending
    again rather than working it out anew: an artifact that answered 404 and
    then 200 must not make a *Processing Error* and a *Completed* of one sequence.
    """

    sequence: int
    result: str
    processed_at: int
    processing_error: dict[str, str] | None
    artifact_count: int
    gave_up: bool
    """The ending came from the item alone (``_give_up``), not from the stored event."""

    @classmethod
    def of(cls, job: Job) -> Announced | None:
        """The ending settled for the job's current ``sequence``; None if there is none."""
        stored = job.announced
        if not isinstance(stored, dict) or stored.get("sequence") != job.sequence:
            return None
        problem = stored.get("processing_error")
        return cls(
            sequence=int(stored["sequence"]),
            result=str(stored["result"]),
            processed_at=int(stored["processed_at"]),
            processing_error=problem if isinstance(problem, dict) else None,
            artifact_count=int(stored.get("artifact_count", 0)),
            gave_up=stored.get("gave_up") is True,
        )

    def failed(self, problem: dict[str, str]) -> Announced:
        """This ending, turned into the processing error ``problem``."""
        return replace(self, result="processing_error", processing_error=problem)

    def as_item(self) -> dict[str, Any]:
        return {
            "sequence": self.sequence,
            "result": self.result,
            "processed_at": self.processed_at,
            "processing_error": self.processing_error,
            "artifact_count": self.artifact_count,
            "gave_up": self.gave_up,
        }


@dataclass(frozen=True)
class Ending:
    """What the announcement and the finish say about the job."""

    outcome: str | None
    event: str | None
    status: str | None
    error: Any = None
    """Sume's ``error`` as received: failed and canceled jobs only."""

    @classmethod
    def of(cls, event: JobEvent | None, job: Job) -> Ending:
        if event is None:  # the stored event was unreadable
            return cls(None, job.event, job.status)
        error = event.data.get("error") if event.outcome != "completed" else None
        return cls(event.outcome, event.event, event.status, error)

    @classmethod
    def given_up(cls, job: Job) -> Ending:
        """From what we wrote ourselves: the stored event's name and status, no error."""
        name = job.event
        outcome = TERMINAL_EVENTS.get(name) if name is not None else None
        return cls(outcome, name if outcome else None, job.status)


def finish_details(
    ending: Ending, progress: Progress, problem: dict[str, str] | None, stored: int
) -> dict[str, Any]:
    """The finish's details on the item, every one bounded; ``stored``: artifacts stored."""
    kept = progress.on_item()
    details: dict[str, Any] = {
        JobAttr.ARTIFACTS: kept,
        JobAttr.ARTIFACT_COUNT: stored,
    }
    if len(kept) < stored:
        details[JobAttr.ARTIFACTS_TRUNCATED] = True
    if ending.outcome is not None:
        details[JobAttr.OUTCOME] = ending.outcome
    if ending.error is not None:
        details[JobAttr.ERROR], cut = stored_error(ending.error)
        if cut:
            details[JobAttr.ERROR_TRUNCATED] = True
    if problem is not None:
        details[JobAttr.PROCESSING_ERROR] = problem
    return details


def codes_only(details: dict[str, Any]) -> dict[str, Any]:
    """The least a finish must write so the item agrees with the announcement."""
    codes: dict[str, Any] = {JobAttr.DETAILS_DROPPED: True}
    if JobAttr.OUTCOME in details:
        codes[JobAttr.OUTCOME] = details[JobAttr.OUTCOME]
    if JobAttr.PROCESSING_ERROR in details:
        codes[JobAttr.PROCESSING_ERROR] = {"code": details[JobAttr.PROCESSING_ERROR]["code"]}
    return codes
