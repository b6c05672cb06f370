"""Sume's webhook wire contract: the two headers and the ``sume-v1`` signature.

Everything that sends or checks a delivery goes through here: ``headers`` for a
sender (the simulator, the local stack, the bench, ``send-test``, the tests),
``verify`` for the receiver. Verification is pure over the raw body bytes: the
clock and the secrets are passed in, nothing is logged, and the only output is
which secret matched (by position) or a machine-readable reason for the
refusal. ``SignedHeaders.read`` checks the headers alone, so a caller can
refuse a garbled request before it fetches any secret.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from sume.core.errors import PermanentError

TIMESTAMP_HEADER: Final = "x-sume-webhook-timestamp"
SIGNATURE_HEADER: Final = "x-sume-webhook-signature"
SCHEME: Final = "sume-v1="
# How far (either way) a delivery's timestamp may be from now.
TOLERANCE_SECONDS: Final = 300

# Bounds on attacker-controlled input, so a garbled header costs little work.
# Sume sends one entry per active secret; 32 leaves plenty of room for rotation.
MAX_SIGNATURE_HEADER_CHARS = 4096
MAX_SIGNATURE_ENTRIES = 32
MAX_TIMESTAMP_DIGITS = 12


class SignatureError(PermanentError):
    """The delivery is not provably from Sume. ``reason`` is safe to return."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def sign(secret: bytes, timestamp: str, raw_body: bytes) -> str:
    """One header entry, as Sume computes it."""
    mac = hmac.new(secret, timestamp.encode("ascii") + b"." + raw_body, hashlib.sha256)
    return SCHEME + mac.hexdigest()


def headers(
    raw_body: bytes, secrets: Iterable[str | bytes], timestamp: int, separator: str = ","
) -> dict[str, str]:
    """The headers Sume sends with ``raw_body``: one signature entry per secret.

    A text secret is signed as its UTF-8 bytes. ``separator`` joins the
    entries; the contract allows spaces around them.
    """
    ts = str(timestamp)
    entries = (sign(s.encode("utf-8") if isinstance(s, str) else s, ts, raw_body) for s in secrets)
    return {TIMESTAMP_HEADER: ts, SIGNATURE_HEADER: separator.join(entries)}


def _timestamp(value: str | None, now: float, tolerance_seconds: int) -> str:
    """Refuse a missing, non-numeric, stale or future timestamp.

    Only ASCII digits count as a number: ``int()`` would also take ``" 17"``,
    ``"+17"``, ``"1_7"`` and non-ASCII digits, none of which Sume sends.
    """
    if not value:
        raise SignatureError("missing_timestamp")
    if not (value.isascii() and value.isdigit()) or len(value) > MAX_TIMESTAMP_DIGITS:
        raise SignatureError("invalid_timestamp")
    if abs(now - int(value)) > tolerance_seconds:
        raise SignatureError("timestamp_out_of_tolerance")
    return value


def _entries(header: str | None) -> tuple[bytes, ...]:
    """The ``sume-v1=`` entries of the header, as bytes for a constant-time compare."""
    if not header or not header.strip():
        raise SignatureError("missing_signature")
    if len(header) > MAX_SIGNATURE_HEADER_CHARS:
        raise SignatureError("malformed_signature")
    parts = header.split(",")
    if len(parts) > MAX_SIGNATURE_ENTRIES:
        raise SignatureError("malformed_signature")
    # surrogateescape keeps any odd character comparable (and unequal) instead
    # of raising: a garbled header is a 401, never a 5xx.
    entries = tuple(
        part.strip().encode("utf-8", "surrogateescape")
        for part in parts
        if part.strip().startswith(SCHEME)
    )
    if not entries:
        raise SignatureError("malformed_signature")
    return entries


@dataclass(frozen=True)
class SignedHeaders:
    """A delivery's signature headers, read once and found well-formed and fresh."""

    timestamp: str
    entries: tuple[bytes, ...]

    @classmethod
    def read(
        cls, headers: Mapping[str, str], now: float, tolerance_seconds: int = TOLERANCE_SECONDS
    ) -> SignedHeaders:
        """Check the headers (lower-case names) alone; raises ``SignatureError``."""
        timestamp = _timestamp(headers.get(TIMESTAMP_HEADER), now, tolerance_seconds)
        return cls(timestamp, _entries(headers.get(SIGNATURE_HEADER)))

    def secret_position(self, raw_body: bytes, secrets: Sequence[bytes]) -> int:
        """Return the position of the secret that signed ``raw_body``.

        Raises ``SignatureError`` otherwise. Every entry is compared against
        every secret, with no early exit on the entries, so timing does not
        tell which entry came close.
        """
        if not secrets or not all(secrets):
            # An empty secret would make the HMAC forgeable by anyone; this is
            # a configuration fault, not a bad delivery.
            raise ValueError("refusing to verify with an empty signing secret")
        matched = -1
        for position, secret in enumerate(secrets):
            expected = sign(secret, self.timestamp, raw_body).encode("ascii")
            hit = False
            for entry in self.entries:
                hit |= hmac.compare_digest(entry, expected)
            if hit and matched < 0:
                matched = position
        if matched < 0:
            raise SignatureError("signature_mismatch")
        return matched
