"""A region's outage, played on moto's server: every AWS call that would reach a region
that is down is refused.

Installed in the process that runs the moto server, this answers 503
``ServiceUnavailable`` to any request signed for a region that is down (its
DynamoDB, SQS, S3, EventBridge, Secrets Manager endpoints), and to any S3
request addressed to a bucket that lives there, whichever region signed it:
S3 sends a client to the bucket's own region, which is down. So the other
region's code that would touch the region that went down fails as in AWS
(botocore retries a 503, then raises it). The jobs table of an MRSC
replication stays served in the regions that are up: a call reaches it
through its own region's endpoint (``devstack.moto_mrsc``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any, Final

from moto.core import DEFAULT_ACCOUNT_ID

STATUS: Final = "503 Service Unavailable"
BODY: Final = (
    b"<Error><Code>ServiceUnavailable</Code><Message>The region is down.</Message></Error>"
)

_down: set[str] = set()
_lock = threading.Lock()
_installed = False


def take_down(region: str) -> None:
    """Refuse every call reaching ``region`` from now on."""
    _install()
    with _lock:
        _down.add(region)


def bring_back(region: str) -> None:
    with _lock:
        _down.discard(region)


def down() -> frozenset[str]:
    with _lock:
        return frozenset(_down)


def reset() -> None:
    """Every region up (a new simulation)."""
    with _lock:
        _down.clear()


def _install() -> None:
    global _installed  # noqa: PLW0603 - moto's server application is process-wide
    with _lock:
        if _installed:
            return
        from moto.moto_server.werkzeug_app import DomainDispatcherApplication

        original = DomainDispatcherApplication.__call__

        def call(
            self: Any, environ: dict[str, Any], start_response: Callable[..., Any]
        ) -> Iterable[bytes]:
            if _reaches_down(environ):
                start_response(STATUS, [("Content-Type", "application/xml")])
                return [BODY]
            return original(self, environ, start_response)

        DomainDispatcherApplication.__call__ = call  # type: ignore[method-assign]
        _installed = True


def _reaches_down(environ: dict[str, Any]) -> bool:
    regions = down()
    if not regions:
        return False
    service, region = _scope(environ.get("HTTP_AUTHORIZATION", ""))
    if region in regions:
        return True
    return service == "s3" and _bucket_region(environ.get("PATH_INFO", "")) in regions


def _scope(authorization: str) -> tuple[str | None, str | None]:
    """The service and region a SigV4 request is signed for."""
    try:
        credential = authorization.split(",", maxsplit=1)[0].split()[1]
        _, _, region, service, _ = credential.split("/")
    except (IndexError, ValueError):
        return None, None
    return service.lower(), region


def _bucket_region(path: str) -> str | None:
    """The region of the bucket a path-style S3 request names (the local endpoint's style)."""
    from moto.s3.models import s3_backends

    name = path.lstrip("/").split("/", 1)[0]
    bucket = s3_backends[DEFAULT_ACCOUNT_ID]["aws"].buckets.get(name) if name else None
    return bucket.region_name if bucket is not None else None
