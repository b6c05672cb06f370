"""Verification of Sume's ``sume-v1`` webhook signature.

A pure function over the raw body bytes: the clock and the secrets are passed
in, nothing is logged, and the only output is which secret matched (by
position) or a machine-readable reason for the refusal.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Sequence

SCHEME = "sume-v1="

# Bounds on attacker-controlled input, so a garbled header costs little work.
# Sume sends one entry per active secret; 32 leaves plenty of room for rotation.
MAX_SIGNATURE_HEADER_CHARS = 4096
MAX_SIGNATURE_ENTRIES = 32
MAX_TIMESTAMP_DIGITS = 12


class SignatureError(Exception):
    """The delivery is not provably from Sume. ``reason`` is safe to return."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def sign(secret: bytes, timestamp: str, raw_body: bytes) -> str:
    """One header entry, as Sume computes it."""
    mac = hmac.new(secret, timestamp.encode("ascii") + b"." + raw_body, hashlib.sha256)
    return SCHEME + mac.hexdigest()


def check_timestamp(timestamp: str | None, now: float, tolerance_seconds: int) -> None:
    """Refuse a missing, non-numeric, stale or future timestamp.

    Only ASCII digits count as a number: ``int()`` would also take ``" 17"``,
    ``"+17"``, ``"1_7"`` and non-ASCII digits, none of which Sume sends.
    """
    if not timestamp:
        raise SignatureError("missing_timestamp")
    if not (timestamp.isascii() and timestamp.isdigit()) or len(timestamp) > MAX_TIMESTAMP_DIGITS:
        raise SignatureError("invalid_timestamp")
    if abs(now - int(timestamp)) > tolerance_seconds:
        raise SignatureError("timestamp_out_of_tolerance")


def signature_entries(header: str | None) -> list[bytes]:
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
    entries = [
        part.strip().encode("utf-8", "surrogateescape")
        for part in parts
        if part.strip().startswith(SCHEME)
    ]
    if not entries:
        raise SignatureError("malformed_signature")
    return entries


def verify(
    raw_body: bytes,
    timestamp: str | None,
    signature_header: str | None,
    secrets: Sequence[bytes],
    now: float,
    tolerance_seconds: int = 300,
) -> int:
    """Return the position of the secret that signed ``raw_body``.

    Raises ``SignatureError`` otherwise. Every entry is compared against every
    secret, with no early exit on the entries, so timing does not tell which
    entry came close.
    """
    if not secrets or not all(secrets):
        # An empty secret would make the HMAC forgeable by anyone; this is a
        # configuration fault, not a bad delivery.
        raise ValueError("refusing to verify with an empty signing secret")
    check_timestamp(timestamp, now, tolerance_seconds)
    entries = signature_entries(signature_header)
    assert timestamp is not None  # checked above; narrows the type
    matched = -1
    for position, secret in enumerate(secrets):
        expected = sign(secret, timestamp, raw_body).encode("ascii")
        hit = False
        for entry in entries:
            hit |= hmac.compare_digest(entry, expected)
        if hit and matched < 0:
            matched = position
    if matched < 0:
        raise SignatureError("signature_mismatch")
    return matched
