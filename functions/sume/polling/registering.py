"""Registering one job for polling: its checks and its one conditional write (``Registry``).

``sume.polling.registry.expect`` and registration by event (``registration.py``)
both go through ``Registry.expect``: the item is created as ``awaiting`` with its
``status_url`` and the first status poll due after ``POLL_INITIAL_SECONDS``. If
the job's webhook arrives first (or later), the receiver's conditional write
completes this same item, keeping ``metadata``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from sume.core.bounded import NotStorable, encode, storable
from sume.core.errors import PermanentError
from sume.core.ids import InvalidJobId, check_job_id
from sume.net.errors import RefusedUrl
from sume.net.policy import HTTPS_ONLY, REFUSED_HOST, UrlPolicy, check_url, url_host
from sume.store.errors import InvalidWrite
from sume.store.jobs import JobsTable

# DynamoDB caps an item at 400 KB and an inline event body may take 256 KiB.
MAX_METADATA_BYTES = 64 * 1024
MAX_URL_CHARS = 2048

INVALID_REGISTRATION = "invalid_registration"
REFUSED_BY_DYNAMODB = "refused_by_dynamodb"


class InvalidRegistration(PermanentError, ValueError):
    """A registration that can never be stored; calling again cannot help.

    ``reason`` is a code: ``INVALID_REGISTRATION`` when the job id, the URL's
    form or the metadata breaks a rule (the message says which); a
    ``URL_REFUSALS`` code when the poller's URL policy refuses the status_url;
    ``REFUSED_BY_DYNAMODB`` when DynamoDB refused the write as invalid all the same.
    """

    def __init__(self, message: str, reason: str = INVALID_REGISTRATION) -> None:
        super().__init__(message)
        self.reason = reason


def _checked_url(status_url: str, policy: UrlPolicy) -> str:
    if not isinstance(status_url, str) or len(status_url) > MAX_URL_CHARS:
        raise InvalidRegistration(
            f"status_url must be a string of at most {MAX_URL_CHARS} characters"
        )
    status_url = status_url.strip()
    try:
        storable(status_url, "status_url")
    except NotStorable as exc:
        raise InvalidRegistration(str(exc)) from None
    # The poller's own rule (sume.net.policy.check_url): what it would refuse on
    # every poll until the job is lost is refused now, with the same code.
    try:
        check_url(status_url, policy)
    except RefusedUrl as exc:
        message = f"status_url: {exc.message}"
        if exc.code == REFUSED_HOST:
            message = (
                f"status_url host {url_host(status_url)!r} is not on STATUS_ALLOWED_HOSTS "
                f"({', '.join(policy.allowed_hosts)})"
            )
        raise InvalidRegistration(message, exc.code) from None
    return status_url


def _checked_metadata(metadata: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if metadata is None:
        return None
    if not isinstance(metadata, Mapping):
        raise InvalidRegistration("metadata must be a JSON object")
    try:
        stored: dict[str, Any] = storable(metadata, "metadata")
    except NotStorable as exc:
        raise InvalidRegistration(str(exc)) from None
    if encode(stored, MAX_METADATA_BYTES).cut:
        raise InvalidRegistration(f"metadata must be at most {MAX_METADATA_BYTES} bytes as JSON")
    return stored


class Registry:
    def __init__(
        self,
        jobs: JobsTable,
        first_poll_after: int,
        clock: Callable[[], float] = time.time,
        url_policy: UrlPolicy = HTTPS_ONLY,
    ) -> None:
        self._jobs = jobs
        self._first_poll_after = first_poll_after
        self._clock = clock
        self._url_policy = url_policy

    def expect(
        self, job_id: str, status_url: str, metadata: Mapping[str, Any] | None = None
    ) -> bool:
        """See ``sume.polling.registry.expect`` (its arguments, answer and errors)."""
        try:
            job_id = check_job_id(job_id)
        except InvalidJobId as exc:
            raise InvalidRegistration(str(exc)) from None
        status_url = _checked_url(status_url, self._url_policy)
        checked = _checked_metadata(metadata)
        now = int(self._clock())
        try:
            return self._jobs.register(
                job_id, status_url, checked, now=now, first_poll_at=now + self._first_poll_after
            )
        except InvalidWrite as exc:
            # A limit the checks above do not know of: sent again, it fails again.
            raise InvalidRegistration(
                f"DynamoDB refused the registration: {exc}", REFUSED_BY_DYNAMODB
            ) from None
