"""What a fetch can fail with, by kind: permanent (retrying cannot help) or transient.

Their ``url`` and message never carry a URL's query string or user info
(``sume.net.urls.redact_url``): presigned links are credentials.
"""

from __future__ import annotations

from sume.core.errors import PermanentError, RetryableError, SumeError
from sume.net.urls import redact_url, scrub_urls

# Client errors a retry can fix: the server asks us to come back later.
RETRYABLE_CLIENT_STATUSES = frozenset({408, 425, 429})


class FetchError(SumeError):
    """A fetch that did not produce a usable answer; ``code`` is machine-readable.

    ``url`` is the redacted URL and ``message`` is scrubbed of the URL's query
    string and user info, so both are safe to log, store and announce.
    """

    def __init__(self, code: str, message: str, url: str, status: int | None = None) -> None:
        message = scrub_urls(message, [url])
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.url = redact_url(url)
        self.status = status

    @property
    def permanent(self) -> bool:
        """Retrying cannot help."""
        return isinstance(self, PermanentError)

    def as_dict(self) -> dict[str, str]:
        return {"code": self.code, "message": self.message, "url": self.url}


class PermanentFetchError(FetchError, PermanentError):
    """Retrying cannot help: refused URL, 4xx, answer over the size cap."""


class TransientFetchError(FetchError, RetryableError):
    """A retry later may succeed: 5xx, 429, timeout, connection or DNS trouble."""


class RefusedUrl(PermanentFetchError):
    """The URL (or a redirect target) is not allowed by the policy."""


def status_error(status: int, url: str) -> FetchError:
    message = f"HTTP {status} from {redact_url(url)}"
    if status >= 500 or status in RETRYABLE_CLIENT_STATUSES:
        return TransientFetchError(f"http_{status}", message, url, status)
    return PermanentFetchError(f"http_{status}", message, url, status)


def deadline_error(url: str) -> TransientFetchError:
    return TransientFetchError("deadline", "no complete answer before the fetch's deadline", url)
