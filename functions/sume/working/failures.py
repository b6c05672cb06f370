"""Failures written down on the job item: bounded, and no URL with its secrets."""

from __future__ import annotations

import re
from collections.abc import Callable

from sume.core.bounded import bounded_text
from sume.net.errors import FetchError
from sume.net.urls import redact_url, scrub_urls
from sume.store.errors import InvalidWrite
from sume.store.job import Job

# A processing error or a retry's last error: {code, message, url?}, each field bounded.
MAX_CODE_BYTES = 64
MAX_MESSAGE_BYTES = 1024
MAX_URL_BYTES = 2048
# The processing error of a job whose work kept failing until its attempts ran
# out: what kept failing is its last error (``sume_cli.codes`` reads both).
GAVE_UP = "too_many_attempts"
_CODE = re.compile(r"[A-Za-z0-9_.-]{1,64}")


def noted(code: str, message: str, url: str | None = None) -> dict[str, str]:
    """A failure written down: bounded, and no URL with its query string or user info."""
    details = {
        "code": bounded_text(code, MAX_CODE_BYTES),
        "message": bounded_text(scrub_urls(message, [url] if url else []), MAX_MESSAGE_BYTES),
    }
    if url is not None:
        details["url"] = bounded_text(redact_url(url), MAX_URL_BYTES)
    return details


def failure_details(exc: BaseException) -> dict[str, str]:
    """What a transient failure looked like, for the item's ``last_error``."""
    if isinstance(exc, FetchError):
        return noted(exc.code, exc.message, exc.url)
    return noted(type(exc).__name__, str(exc))


def last_error_code(job: Job) -> str:
    """The code of the job's last error, if it is one of ours (a word, not text)."""
    code = job.last_error.get("code") if job.last_error is not None else None
    return code if isinstance(code, str) and _CODE.fullmatch(code) else "unknown"


def give_back(write: Callable[[dict[str, str]], bool], details: dict[str, str]) -> bool:
    """Release or park; should DynamoDB refuse the details, with their code alone.

    Sending the refused write again would fail again, and an unreleased
    claim makes the retry wait out the whole lease.
    """
    try:
        return write(details)
    except InvalidWrite:
        return write({"code": details["code"]})
