"""The error codes a job that ended in error carries, and the one it is grouped by."""

from __future__ import annotations

from sume.store.job import Job, JobAttr, State
from sume.working.failures import GAVE_UP


def error_codes(job: Job) -> list[tuple[str, str]]:
    """The codes a job that ended in error carries: why it ended, and its last retried error.

    A job that gave up (``too_many_attempts``) says what kept failing only in
    ``last_error``; a processed job's ``last_error`` is a failure a retry fixed,
    so it is not one of them.
    """
    if job.state != State.PROCESSING_ERROR:
        return []
    found = []
    for where, problem in (
        (JobAttr.PROCESSING_ERROR.value, job.processing_error),
        (JobAttr.LAST_ERROR.value, job.last_error),
    ):
        code = problem.get("code") if isinstance(problem, dict) else None
        if isinstance(code, str):
            found.append((where, code))
    return found


def cause(job: Job) -> str | None:
    """The code that names what went wrong: what kept failing when the job gave up
    (its last error), else why it ended; None for a job not in error.

    ``replay --error-code`` with it selects the job (``Filters.why`` matches either code).
    """
    codes = dict(error_codes(job))
    ended = codes.get(JobAttr.PROCESSING_ERROR.value)
    last = codes.get(JobAttr.LAST_ERROR.value)
    if ended == GAVE_UP or ended is None:
        return last or ended
    return ended
