"""The worker's errors, and which of them spend the attempt budget."""

from __future__ import annotations

from sume.core.errors import AWS_FAILURES, PermanentError, RetryableError
from sume.net.errors import TransientFetchError
from sume.working.announce import AnnounceFailed
from sume.working.failures import noted


class JobBusy(RetryableError):
    """Another worker holds a live lease on the job: retry later."""


class OutOfTime(RetryableError):
    """Too little of the invocation is left for the next step: retry later.

    Raised before claiming (the job is untouched) or before an artifact copy
    (the claim is released first, with the copies made so far saved, so the
    retry carries on from there).
    """


class LeaseRunningOut(RetryableError):
    """Too little of our lease is left to announce safely: retry later."""


class FinishFailed(RetryableError):
    """The announcement is out, but AWS failed the finish: the retry announces the
    ending written down before it (``Announced``), so this is no failure of the
    work a give-up could follow."""


class ClaimLost(PermanentError):
    """Our claim was taken over (our lease ran out): the new holder finishes."""


class Parked(RetryableError):
    """The job could not be brought to any end on its message's last receive.

    It was parked (``JobsTable.park``): the message goes to the DLQ, where an
    operator redrives it once the cause (``__cause__``) is fixed.
    """


# After a claim, the work did not fail: it ran out of time, or only its finish
# was not written. Its attempt is given back.
NOT_FAILURES = (OutOfTime, LeaseRunningOut, FinishFailed)
# The work failed in a way a later attempt may fix: each spends the budget.
# (Every other retryable error, JobBusy, comes before any claim.)
WORK_FAILURES: tuple[type[Exception], ...] = (TransientFetchError, AnnounceFailed, *AWS_FAILURES)


class Problem(PermanentError):
    """Retrying cannot fix this job's work: it becomes a processing error."""

    def __init__(self, code: str, message: str, url: str | None = None) -> None:
        self.details = noted(code, message, url)
        super().__init__(self.details["message"])
