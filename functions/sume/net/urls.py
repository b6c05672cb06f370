"""URLs from outside, made safe to write down.

Artifact links are often presigned: their query string (and sometimes their
user info) is a bearer credential. Anything we store, log or announce keeps
only what identifies the resource: scheme, host, port and path.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import urlsplit, urlunsplit

# Long enough for any real path, short enough for a log line or an item field.
MAX_REDACTED_CHARS = 2048
_ABSOLUTE_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s\"'<>]+")


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


def scrub_urls(text: str, urls: Iterable[str] = ()) -> str:
    """``text`` with every URL in it redacted, for error messages and log lines.

    The secrets of each of ``urls`` (query, fragment, user info) also go where
    they appear on their own, as in urllib3's "Max retries exceeded with url:
    /path?query".
    """
    for url in urls:
        text = text.replace(url, redact_url(url))
        # Not urlsplit: it raises on the malformed URLs error messages often name.
        before_fragment, _, fragment = url.partition("#")
        query = before_fragment.partition("?")[2]
        userinfo = before_fragment.partition("://")[2].partition("/")[0].rpartition("@")[0]
        if query:
            text = text.replace(f"?{query}", "")
        for secret in (query, fragment, userinfo):
            if secret:
                text = text.replace(secret, "[redacted]")
    return _ABSOLUTE_URL.sub(lambda match: redact_url(match.group()), text)
