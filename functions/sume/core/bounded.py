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
- ``storable``: a JSON value from outside (registration metadata) as DynamoDB
  stores it exactly, or ``NotStorable`` saying where and why it cannot be:
  DynamoDB's limits (``DYNAMODB_*``) are checked here, not met at the write.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from decimal import Decimal, DecimalException
from typing import Any

from boto3.dynamodb.types import DYNAMODB_CONTEXT

from sume.core.errors import PermanentError

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
        if isinstance(value, Decimal):
            # A finite Decimal's text is a JSON number, every digit kept.
            if value.is_finite():
                return str(value)
            self.exact = False
            return json.dumps(str(value))
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


# DynamoDB's limits on an attribute value that a value from outside can break
# (docs/poller.md, "What metadata DynamoDB can store", cites AWS's pages). The
# nesting depth counts the item's top-level attribute as level 1: AWS accepts
# a scalar under 31 maps or lists and refuses it under 32.
DYNAMODB_MAX_DEPTH = 32
DYNAMODB_MAX_DIGITS = 38
# The adjusted exponent of a non-zero number: 1E-130 up to 9.99...9E+125 (38 nines).
DYNAMODB_EXPONENTS = range(-130, 126)


def nests_deeper(
    value: Any, children: Callable[[Any], Iterable[Any]], levels: int = DYNAMODB_MAX_DEPTH
) -> bool:
    """True if ``value`` nests more than ``levels`` levels; ``children(v)`` is what ``v`` holds.

    ``value`` is level 1 and what a map or list holds is one level below it,
    so a scalar or an empty map is one level. The walk never goes below
    ``levels`` and does not recurse, so a hostile depth costs no more than a
    legal one.
    """
    stack = [(value, 1)]
    while stack:
        node, level = stack.pop()
        for child in children(node):
            if level >= levels:
                return True
            stack.append((child, level + 1))
    return False


def json_children(value: Any) -> Iterable[Any]:
    """What a JSON value (as Python holds it) contains: a map's values, a list's items."""
    if isinstance(value, Mapping):
        return value.values()
    if isinstance(value, list | tuple):
        return value
    return ()


class NotStorable(PermanentError, ValueError):
    """A value DynamoDB cannot store exactly as given; the message says where and why."""


_Path = tuple[str | int, ...]
_MAX_SHOWN_PATH = 256


def _where(name: str, path: _Path) -> str:
    steps = "".join(f"[{json.dumps(step)}]" for step in path)
    return bounded_text(name + steps, _MAX_SHOWN_PATH)


def storable(value: Any, name: str) -> Any:
    """``value``, a JSON value as Python holds it, as DynamoDB stores it exactly.

    Maps (string keys) become dicts, lists and tuples lists; strings, booleans
    and None stay. A number becomes an int when it is whole, else a Decimal
    with every digit it was given: an int or a Decimal as it is, a float as
    its shortest repr (``0.1`` is 0.1, the number ``json.dumps`` writes).
    Raises ``NotStorable``, naming the place under ``name``, for what DynamoDB
    refuses or would change: nesting past ``DYNAMODB_MAX_DEPTH``, a number
    with more than ``DYNAMODB_MAX_DIGITS`` significant digits, outside
    ``DYNAMODB_EXPONENTS`` or not finite, an empty map key (DynamoDB names
    must be at least one character), a lone surrogate (not UTF-8), and any
    other type.
    """
    if nests_deeper(value, json_children):
        raise NotStorable(
            f"{name} nests deeper than DynamoDB's {DYNAMODB_MAX_DEPTH} levels "
            "(the attribute itself is the first)"
        )
    root: dict[str, Any] = {}
    # (value, the container its copy goes into, under which key or index, its path)
    stack: list[tuple[Any, Any, Any, _Path]] = [(value, root, name, ())]
    while stack:
        node, parent, slot, path = stack.pop()
        if isinstance(node, Mapping):
            copy: dict[str, Any] = {}
            for key, item in node.items():
                if not isinstance(key, str):
                    raise NotStorable(f"{_where(name, path)}: a key is not a string")
                if not key:
                    raise NotStorable(
                        f"{_where(name, path)}: a key is empty (DynamoDB refuses empty names)"
                    )
                _check_text(key, name, path)
                copy[key] = None
                stack.append((item, copy, key, (*path, key)))
            parent[slot] = copy
        elif isinstance(node, list | tuple):
            items: list[Any] = [None] * len(node)
            stack.extend((item, items, i, (*path, i)) for i, item in enumerate(node))
            parent[slot] = items
        else:
            parent[slot] = _scalar(node, name, path)
    return root[name]


def _check_text(text: str, name: str, path: _Path) -> None:
    if not text.isascii() and _SURROGATE.search(text):
        raise NotStorable(f"{_where(name, path)}: a lone surrogate is not UTF-8")


def _scalar(value: Any, name: str, path: _Path) -> Any:
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        _check_text(value, name, path)
        return value
    if isinstance(value, int | float | Decimal):
        return _number(value, name, path)
    raise NotStorable(f"{_where(name, path)}: {type(value).__name__} is not a JSON value")


def _number(value: int | float | Decimal, name: str, path: _Path) -> int | Decimal:
    if isinstance(value, float):
        if not math.isfinite(value):
            raise NotStorable(f"{_where(name, path)}: {value} is not a finite number")
        value = Decimal(repr(value))
    number = Decimal(value)
    if not number.is_finite():
        raise NotStorable(f"{_where(name, path)}: {number} is not a finite number")
    if number.is_zero():
        return 0
    sign, digits, exponent = number.as_tuple()
    assert isinstance(exponent, int)
    # DynamoDB trims leading and trailing zeros: they are no digits of precision.
    kept = len(digits)
    while digits[kept - 1] == 0:
        kept -= 1
    number = Decimal((sign, digits[:kept], exponent + len(digits) - kept))
    if kept > DYNAMODB_MAX_DIGITS:
        raise NotStorable(
            f"{_where(name, path)}: a number of {kept} significant digits "
            f"(DynamoDB keeps {DYNAMODB_MAX_DIGITS})"
        )
    if number.adjusted() not in DYNAMODB_EXPONENTS:
        raise NotStorable(
            f"{_where(name, path)}: a number of magnitude 1E{number.adjusted():+d} "
            "(DynamoDB stores 1E-130 to 9.99...E+125, either sign)"
        )
    try:
        # boto3 writes and reads numbers in this context: what it cannot hold
        # exactly (38 digits in the last few exponents above 1E-130) it refuses.
        stored = DYNAMODB_CONTEXT.create_decimal(number)
    except DecimalException:
        raise NotStorable(
            f"{_where(name, path)}: too many digits for a number this close to zero "
            f"(boto3's DynamoDB numbers end at 1E{DYNAMODB_CONTEXT.Etiny()})"
        ) from None
    # A whole number is an int, but for one whose zeros alone are more digits
    # than boto3 writes (1E+50 stays a Decimal).
    whole = stored == stored.to_integral_value() and stored.adjusted() < DYNAMODB_MAX_DIGITS
    return int(stored) if whole else stored
