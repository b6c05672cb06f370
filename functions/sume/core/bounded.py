"""Outside data made safe to write down: on the job item and in the announcement.

Sume's ``error`` may be any JSON: floats DynamoDB's serializer refuses,
nesting deeper than DynamoDB's 32 levels, hundreds of kilobytes, lone
surrogates no UTF-8 encoder takes. A write DynamoDB or EventBridge refuses
leaves the job unfinished, and its retry announces it again, so nothing from
outside reaches either without passing through here first:

- ``stored_error``: the item keeps Sume's ``error`` as compact JSON text,
  ASCII-escaped (so it always encodes), at most ``MAX_STORED_ERROR_CHARS``
  characters; a longer text is cut there and marked.
- ``announced_error``: the announcement carries Sume's ``error`` itself when
  it is exact JSON (finite numbers, no lone surrogates) nesting at most
  ``MAX_ANNOUNCED_ERROR_DEPTH`` levels whose compact JSON is at most
  ``MAX_ANNOUNCED_ERROR_CHARS`` characters; otherwise only its ``code`` and
  ``message`` strings, cut to ``SUMMARY_FIELDS`` characters, and a mark.
- ``bounded_text``: any other outside string (a status, a content type, an
  error message) cleaned of lone surrogates and cut to a number of UTF-8 bytes.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

MAX_STORED_ERROR_CHARS = 16 * 1024
MAX_ANNOUNCED_ERROR_CHARS = 8 * 1024
MAX_ANNOUNCED_ERROR_DEPTH = 8
SUMMARY_FIELDS = {"code": 256, "message": 1024}

_SURROGATE = re.compile("[\ud800-\udfff]")


def clean_text(text: str) -> str:
    """``text`` with each lone surrogate (JSON allows them, UTF-8 does not) as U+FFFD."""
    if text.isascii():
        return text
    return _SURROGATE.sub("\ufffd", text)


def bounded_text(value: str, max_bytes: int) -> str:
    """``value`` cleaned and cut to at most ``max_bytes`` UTF-8 bytes, on a character boundary."""
    text = clean_text(value)
    data = text.encode("utf-8")
    return text if len(data) <= max_bytes else data[:max_bytes].decode("utf-8", "ignore")


@dataclass(frozen=True)
class Encoded:
    text: str
    """Compact, ASCII-only JSON; only its first ``limit`` characters when ``cut``."""
    cut: bool
    exact: bool
    """The text decodes to the value itself: every number finite, no lone surrogate."""
    depth: int
    """Nesting levels of objects and arrays (of the part encoded, when cut)."""


class _Encoder:
    """Compact JSON without recursion, stopping once past a length.

    ``json.dumps`` recurses (a deep value raises ``RecursionError``) and always
    writes the whole value before it can be cut.
    """

    def __init__(self) -> None:
        self.exact = True
        self.depth = 0

    def pieces(self, value: Any) -> Iterator[str]:
        stack: list[tuple[Any, int] | str] = [(value, 0)]
        while stack:
            top = stack.pop()
            if isinstance(top, str):
                yield top
                continue
            node, level = top
            if isinstance(node, dict):
                yield self._open("{", "}", level, stack)
                entries = list(node.items())
                for i in range(len(entries) - 1, -1, -1):
                    key, item = entries[i]
                    stack.append((item, level + 1))
                    stack.append(("," if i else "") + self._string(key) + ":")
            elif isinstance(node, list):
                yield self._open("[", "]", level, stack)
                for i in range(len(node) - 1, -1, -1):
                    stack.append((node[i], level + 1))
                    if i:
                        stack.append(",")
            else:
                yield self._scalar(node)

    def _open(self, opening: str, closing: str, level: int, stack: list[Any]) -> str:
        self.depth = max(self.depth, level + 1)
        stack.append(closing)
        return opening

    def _string(self, text: str) -> str:
        if not text.isascii() and _SURROGATE.search(text):
            self.exact = False
        return json.dumps(text)

    def _scalar(self, value: Any) -> str:
        if isinstance(value, str):
            return self._string(value)
        if isinstance(value, float) and not math.isfinite(value):
            # JSON has no NaN or Infinity: kept as the strings "NaN", "Infinity", "-Infinity".
            self.exact = False
            return json.dumps(json.dumps(value))
        return json.dumps(value)


def encode(value: Any, limit: int) -> Encoded:
    """Compact JSON of ``value``, at most ``limit`` characters."""
    encoder = _Encoder()
    pieces: list[str] = []
    length = 0
    for piece in encoder.pieces(value):
        pieces.append(piece)
        length += len(piece)
        if length > limit:
            return Encoded("".join(pieces)[:limit], True, encoder.exact, encoder.depth)
    return Encoded("".join(pieces), False, encoder.exact, encoder.depth)


def stored_error(error: Any) -> tuple[str, bool]:
    """Sume's ``error`` as the item keeps it: JSON text, and whether it was cut."""
    encoded = encode(error, MAX_STORED_ERROR_CHARS)
    return encoded.text, encoded.cut


def announced_error(error: Any) -> tuple[Any, bool]:
    """Sume's ``error`` as the announcement carries it, and whether it was cut."""
    if error is None:
        return None, False
    encoded = encode(error, MAX_ANNOUNCED_ERROR_CHARS)
    if encoded.exact and not encoded.cut and encoded.depth <= MAX_ANNOUNCED_ERROR_DEPTH:
        return error, False
    fields = error if isinstance(error, dict) else {"message": error}
    summary = {
        name: clean_text(fields[name])[:chars]
        for name, chars in SUMMARY_FIELDS.items()
        if isinstance(fields.get(name), str)
    }
    return summary, True
