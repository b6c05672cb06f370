"""URLs from outside, made safe to write down.

Artifact links are often presigned: their query string (and sometimes their
user info) is a bearer credential. Anything we store, log or announce keeps
only what identifies the resource: scheme, host, port and path.
"""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

# Long enough for any real path, short enough for a log line or an item field.
MAX_REDACTED_CHARS = 2048


def redact_url(url: object) -> str:
    """``scheme://host[:port]/path`` of ``url``: no user info, query or fragment."""
    text = str(url)
    try:
        parts = urlsplit(text)
        host = parts.hostname or ""
        port = parts.port
    except ValueError:
        return "<unparseable url>"
    if not parts.scheme or not host:
        return "<unparseable url>"
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{host}:{port}" if port is not None else host
    redacted = urlunsplit((parts.scheme.lower(), netloc, parts.path, "", ""))
    return redacted[:MAX_REDACTED_CHARS]
