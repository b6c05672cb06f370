"""The one rule for a Sume ``job_id``, applied wherever an id enters the system.

An id is the DynamoDB key, the SQS message body, a segment of S3 keys, a field
of every announcement and a key of every log line. The rule accepts exactly
the ids all of these carry unchanged, so nothing downstream ever strips,
escapes or rewrites one:

- a non-empty string of at most ``MAX_JOB_ID_BYTES`` UTF-8 bytes;
- no control characters (Unicode Cc: C0 incl. tab and newline, DEL, C1):
  SQS refuses most of them in a message body, and logs and terminals mangle
  the rest;
- no surrogates (Cs): not encodable as UTF-8, so no AWS service takes them;
- no noncharacters (U+FDD0..U+FDEF and the last two code points of every
  plane, U+FFFE/U+FFFF among them): SQS refuses U+FFFE/U+FFFF;
- no line or paragraph separators (U+2028/U+2029): they split log lines;
- no format characters (Unicode Cf: zero-width spaces and joiners, bidi
  controls, the BOM, soft hyphens, ...). The services would carry them, but
  they are invisible: two ids that print the same would differ, an operator
  could not type one into the ops CLI, bidi controls reorder how a log line
  reads, and text tools drop a leading BOM. Machine-made ids never need them.
  Which code points are Cf comes from the runtime's Unicode database; newer
  Unicode versions only add a few rare ones;
- no whitespace at either end (what ``str.strip`` removes): it cannot be seen
  in a log line, copy and paste loses it, and any tool that trims would then
  name another job.

Whitespace inside an id, private-use characters and unassigned code points are
accepted: every service carries them and they are visible or at least typeable.
"""

from __future__ import annotations

import re
import unicodedata
from urllib.parse import quote

from sume.core.errors import PermanentError

# Every S3 key built from an id must stay within S3's 1,024 bytes. Ids are
# percent-encoded in keys (up to 3 bytes per byte), so 256 bytes of id take at
# most 768 bytes of key, leaving room for "jobs/", the artifact's position and
# a 120-character file name (or "events/", a SHA-256 and ".json"). Real Sume
# ids are a few dozen ASCII characters.
MAX_JOB_ID_BYTES = 256

# The last two code points of each of the 17 planes are noncharacters too.
_PLANE_ENDS = "".join(chr(plane << 16 | 0xFFFE) + chr(plane << 16 | 0xFFFF) for plane in range(17))
_REFUSED = re.compile(f"[\x00-\x1f\x7f-\x9f\ud800-\udfff\ufdd0-\ufdef\u2028\u2029{_PLANE_ENDS}]")


class InvalidJobId(PermanentError, ValueError):
    """A value that is not a usable job id; ``str(exc)`` says which part of the rule it breaks."""

    reason = "invalid_job_id"


_KINDS = {
    "Cc": "a control character",
    "Cs": "a surrogate",
    "Cf": "an invisible format character",
    "Zl": "a line separator",
    "Zp": "a paragraph separator",
}


def _refused_character(value: str) -> str | None:
    found = _REFUSED.search(value)
    char = found.group() if found else None
    if char is None:
        char = next((c for c in value if unicodedata.category(c) == "Cf"), None)
    if char is None:
        return None
    return f"U+{ord(char):04X}, {_KINDS.get(unicodedata.category(char), 'a noncharacter')}"


def check_job_id(value: object) -> str:
    """``value`` itself when it is a valid job id; otherwise raise ``InvalidJobId``."""
    if not isinstance(value, str):
        raise InvalidJobId("job_id must be a string")
    if not value:
        raise InvalidJobId("job_id must not be empty")
    if len(value) > MAX_JOB_ID_BYTES:
        # Cheaper than encoding a huge value: every character is at least one byte.
        raise InvalidJobId(f"job_id must be at most {MAX_JOB_ID_BYTES} UTF-8 bytes")
    # Printable ASCII (nearly every real id) breaks no rule but the one on whitespace.
    if not (value.isascii() and value.isprintable()):
        refused = _refused_character(value)
        if refused is not None:
            raise InvalidJobId(f"job_id must not contain {refused}")
        if len(value.encode("utf-8")) > MAX_JOB_ID_BYTES:
            raise InvalidJobId(f"job_id must be at most {MAX_JOB_ID_BYTES} UTF-8 bytes")
    if value != value.strip():
        raise InvalidJobId("job_id must not start or end with whitespace")
    return value


def is_job_id(value: object) -> bool:
    try:
        check_job_id(value)
    except InvalidJobId:
        return False
    return True


def key_segment(job_id: str) -> str:
    """An accepted id as one S3 key segment: percent-encoded, so no ``/`` and ASCII only.

    A dot-only id has its dots encoded too: S3 keeps ``jobs/../x`` as is, but
    consoles, SDK transfer tools and sync to disk resolve ``.`` and ``..``.
    Every other id keeps the segment it always had, so a retry overwrites and
    never adds an object.
    """
    segment = quote(job_id, safe="")
    if not segment.strip("."):
        return segment.replace(".", "%2E")
    return segment
