"""What a job's ``status_url`` says, turned into a terminal event or "not yet".

Sume's status endpoint is the source of truth when webhooks never arrived, but
its answer shape is not part of the webhook contract, so it is read
tolerantly (documented in docs/poller.md, "What a status answer means"):

1. An answer is about this job only: one that names another job, by a top-level
   ``job_id`` or ``id`` (whichever form it has) other than this job's id, is
   never recorded (``Verdict.OTHER_JOB``). A registration may point a job at any
   path of an allowed host, another job's status URL included.
2. A body that is itself a Sume envelope with a terminal ``event`` (and this
   job's ``job_id``, or none) is used as is: the body text is what gets stored.
3. Otherwise the first of ``status`` / ``state`` (top level, case-insensitive)
   whose value is a terminal word decides, and an envelope is built around the
   answer (kept whole under ``status_response``; ``artifacts`` and ``error``
   carried where the worker reads them).
4. Anything else (running, queued, an unknown word, a body that is not a JSON
   object, a 404) means "not yet".
"""

from __future__ import annotations

import enum
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sume.contract.envelope import (
    TERMINAL_EVENTS,
    JobEvent,
    MalformedEvent,
    from_mapping,
    load_json,
)
from sume.core.ids import InvalidJobId, check_job_id
from sume.core.secrets import Fetch, parse_api_token
from sume.net.errors import FetchError
from sume.net.fetch import SafeHttp
from sume.net.policy import REFUSED_HOST, host_listed

COMPLETED_WORDS = frozenset(
    {"completed", "complete", "succeeded", "success", "successful", "done", "finished"}
)
FAILED_WORDS = frozenset({"failed", "failure", "error", "errored"})
CANCELED_WORDS = frozenset({"canceled", "cancelled"})
STATUS_FIELDS = ("status", "state")
# A status answer is small; a huge one is refused rather than held in memory.
MAX_STATUS_BYTES = 1024 * 1024
# The reason a status_url off STATUS_ALLOWED_HOSTS is refused (as sume.net.policy names it).
# The top-level fields by which an answer names the job it is about.
JOB_NAME_FIELDS = ("job_id", "id")
# The reason an answer naming another job is not recorded.
JOB_ID_MISMATCH = "job_id_mismatch"
# Sume answered, and the job is not finished: the one "not yet" that is no poll error.
NOT_TERMINAL = "not_terminal"

_EVENT_FOR_WORDS = (
    (COMPLETED_WORDS, "job.completed", "OK"),
    (FAILED_WORDS, "job.failed", "ERROR"),
    (CANCELED_WORDS, "job.canceled", "ERROR"),
)
_DEFAULT_ERRORS = {
    "job.failed": {"code": "JOB_FAILED", "message": "status_url reported the job failed"},
    "job.canceled": {"code": "JOB_CANCELED", "message": "status_url reported the job canceled"},
}


class Verdict(enum.StrEnum):
    TERMINAL = "terminal"
    PENDING = "pending"
    """Sume answered and the job is not finished (or the answer is not understood)."""
    UNREACHABLE = "unreachable"
    """No usable answer (timeout, 5xx, refused URL); ``permanent`` says if retrying can help."""
    OTHER_JOB = "other_job"
    """Sume answered about another job: never recorded, whatever it says."""


@dataclass(frozen=True)
class StatusResult:
    verdict: Verdict
    reason: str
    event: JobEvent | None = None
    permanent: bool = False


def _terminal_event(word: str) -> tuple[str, str] | None:
    normalised = word.strip().lower()
    for words, event, status in _EVENT_FOR_WORDS:
        if normalised in words:
            return event, status
    return None


def _artifacts(data: Mapping[str, Any]) -> Any:
    if "artifacts" in data:
        return data["artifacts"]
    payload = data.get("payload")
    if isinstance(payload, dict) and "artifacts" in payload:
        return payload["artifacts"]
    return None


def _error(data: Mapping[str, Any], event: str) -> dict[str, Any]:
    error = data.get("error")
    if isinstance(error, dict):
        return error
    if isinstance(error, str) and error.strip():
        return {"message": error}
    return dict(_DEFAULT_ERRORS[event])


def _terminal_field(data: Mapping[str, Any]) -> tuple[str, str] | None:
    for name in STATUS_FIELDS:
        value = data.get(name)
        terminal = _terminal_event(value) if isinstance(value, str) else None
        if terminal is not None:
            return terminal
    return None


def build_envelope(job_id: str, event: str, status: str, data: Mapping[str, Any]) -> JobEvent:
    """A Sume envelope for ``event`` around a status answer, which is kept whole."""
    envelope: dict[str, Any] = {"event": event, "job_id": job_id, "status": status}
    if event == "job.completed":
        artifacts = _artifacts(data)
        envelope["payload"] = {"artifacts": artifacts if artifacts is not None else []}
    else:
        envelope["error"] = _error(data, event)
    envelope["status_response"] = dict(data)
    # ASCII escapes: a lone surrogate in the answer stays an escape, so the
    # stored text is valid UTF-8.
    raw = json.dumps(envelope, separators=(",", ":"))
    # The same rules as a webhook body (job id, bounded status).
    delivery = from_mapping(envelope, raw)
    assert isinstance(delivery, JobEvent)
    return delivery


def _names_another_job(job_id: str, data: Mapping[str, Any]) -> bool:
    """Whether ``data`` names, by any of ``JOB_NAME_FIELDS``, a job other than ``job_id``.

    A field that is absent or null names no job. Any other value that is not
    ``job_id`` exactly (another id, a number, an object) is another job's,
    even beside a field naming this one: only an answer that is plainly about
    this job, or about no job in particular, may be recorded for it.
    """
    return any(data.get(name) not in (None, job_id) for name in JOB_NAME_FIELDS)


def _from_envelope(job_id: str, data: dict[str, Any], text: str) -> StatusResult | None:
    """An answer that is itself a terminal envelope; ``data`` names no other job."""
    event = data.get("event")
    if event not in TERMINAL_EVENTS:
        return None
    if data.get("job_id") is None:
        # Terminal, but not storable as is without a job id: wrap it.
        status = data.get("status")
        if not isinstance(status, str) or not status:
            status = "OK" if event == "job.completed" else "ERROR"
        return StatusResult(
            Verdict.TERMINAL, "envelope_without_job_id", build_envelope(job_id, event, status, data)
        )
    try:
        delivery = from_mapping(data, text)
    except MalformedEvent as exc:
        return StatusResult(Verdict.PENDING, exc.reason)
    assert isinstance(delivery, JobEvent)
    return StatusResult(Verdict.TERMINAL, "envelope", delivery)


def _status_code_verdict(http_status: int) -> StatusResult | None:
    """The verdict a status code alone decides, or None for a 2xx."""
    if http_status in (404, 410):
        # Sume may not know a job it has only just accepted; the age cut-off
        # ends the wait if it never does.
        return StatusResult(Verdict.PENDING, f"http_{http_status}")
    if http_status == 429 or http_status >= 500:
        return StatusResult(Verdict.UNREACHABLE, f"http_{http_status}")
    if not 200 <= http_status < 300:
        return StatusResult(Verdict.UNREACHABLE, f"http_{http_status}", permanent=True)
    return None


def _json_object(text: str) -> dict[str, Any] | str:
    """The body as a JSON object, or why it is not one."""
    try:
        data = load_json(text)
    except MalformedEvent as exc:
        return exc.reason
    except ValueError:
        return "body_not_json"
    return data if isinstance(data, dict) else "body_not_object"


def _from_object(job_id: str, data: dict[str, Any], text: str) -> StatusResult:
    """What a 2xx answer that is a JSON object says about ``job_id``."""
    if _names_another_job(job_id, data):
        # Another job's answer says nothing about this one, terminal or not.
        return StatusResult(Verdict.OTHER_JOB, JOB_ID_MISMATCH)
    if (result := _from_envelope(job_id, data, text)) is not None:
        return result
    if (terminal := _terminal_field(data)) is not None:
        event, status = terminal
        return StatusResult(
            Verdict.TERMINAL, "status_field", build_envelope(job_id, event, status, data)
        )
    return StatusResult(Verdict.PENDING, NOT_TERMINAL)


def interpret(job_id: str, http_status: int, text: str) -> StatusResult:
    """Map one answer of the status endpoint (status code and body text)."""
    try:
        check_job_id(job_id)
    except InvalidJobId as exc:
        # Only a job registered before the id rule: never recorded, ops should look.
        return StatusResult(Verdict.UNREACHABLE, exc.reason, permanent=True)
    if (decided := _status_code_verdict(http_status)) is not None:
        return decided
    data = _json_object(text)
    if isinstance(data, str):
        return StatusResult(Verdict.PENDING, data)
    return _from_object(job_id, data, text)


def bearer_headers(token: str | None) -> dict[str, str]:
    headers = {"accept": "application/json"}
    if token:
        headers["authorization"] = f"Bearer {token}"
    return headers


TokenSource = Callable[[], str | None]


HttpGet = Callable[[str, Mapping[str, str], float | None], tuple[int, str]]
"""GET a URL with headers before a deadline (``time.monotonic()``, None: the
client's own total timeout); return (status code, body text) or raise
``FetchError`` (permanent when retrying cannot help)."""


class StatusClient:
    """Asks a job's status_url, with Sume's API token only for a host on the allow-list.

    A status_url comes from whoever registered the job, so the token goes only
    to a host ops listed as Sume's (and ``sume.net.fetch`` drops it on a redirect
    to another origin). Without a list, a status_url is still read (public
    hosts only) but never with the token.
    """

    def __init__(self, get: HttpGet, token: TokenSource, allowed_hosts: Sequence[str]) -> None:
        self._get = get
        self._token = token
        self._allowed = tuple(allowed_hosts)

    def check(self, job_id: str, status_url: str, deadline: float | None = None) -> StatusResult:
        if self._allowed and not host_listed(status_url, self._allowed):
            # Before the token is even read; the fetch would refuse the host too.
            return StatusResult(Verdict.UNREACHABLE, REFUSED_HOST, permanent=True)
        headers = bearer_headers(self._token() if self._allowed else None)
        try:
            http_status, text = self._get(status_url, headers, deadline)
        except FetchError as exc:
            return StatusResult(Verdict.UNREACHABLE, exc.code, permanent=exc.permanent)
        return interpret(job_id, http_status, text)


def status_getter(http: SafeHttp) -> HttpGet:
    """GET through ``sume.net.fetch`` (SSRF-safe: same URL rules as artifact downloads)."""

    def get(url: str, headers: Mapping[str, str], deadline: float | None) -> tuple[int, str]:
        return http.get_text(url, headers, max_bytes=MAX_STATUS_BYTES, deadline=deadline)

    return get


def token_source(fetch: Fetch | None) -> TokenSource:
    """Sume's API token as ``fetch`` reads it; None: no token is configured.

    Checked at each use, so a malformed token is a ``ConfigurationError`` of
    the poll that needs it, not of the whole function.
    """
    if fetch is None:
        return lambda: None
    return lambda: parse_api_token(fetch())
