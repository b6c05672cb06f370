"""DynamoDB's item size, by AWS's documented rules: the one count the worker, the bench and
the local stack's moto limits all use.

AWS's rules ("DynamoDB item sizes and formats"): strings in UTF-8 bytes;
numbers one byte per two significant digits plus one (rounded up here);
binary in raw bytes (base64 text counted as 3/4 of its length, rounded up);
null and boolean one byte; a list or map 3 bytes plus one byte and the size
of each element (a map element adds its name's UTF-8 bytes). Sets are
counted like lists, which AWS does not document and which can only overstate
them. Where AWS calls a size approximate, the count rounds up.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any, Final

MAX_ITEM_BYTES: Final = 400 * 1024
"""DynamoDB's cap on one item: names and values, every attribute counted."""


def utf8_size(text: str) -> int:
    # A lone surrogate is not UTF-8 at all; count it as the 3 bytes AWS would
    # see if it let it through, rather than fail the count itself.
    return len(text.encode("utf-8", "surrogatepass"))


def _number_size(text: str) -> int:
    mantissa = re.split("[eE]", text.lstrip("+-"), maxsplit=1)[0]
    significant = mantissa.replace(".", "").strip("0")
    return (len(significant) + 1) // 2 + 1


def _binary_size(data: bytes | str) -> int:
    return len(data) if isinstance(data, bytes) else -(-len(data) * 3 // 4)


_SCALAR_SIZES: Final[dict[str, Callable[[Any], int]]] = {
    "S": utf8_size,
    "N": _number_size,
    "B": _binary_size,
    "BOOL": lambda _: 1,
    "NULL": lambda _: 1,
}


def typed(value: Any) -> tuple[str, Any]:
    """``(type, value)`` of an attribute value: a request's ``{"S": ...}``, or any object
    with ``type`` and ``value`` (as a store keeps it)."""
    if isinstance(value, dict):
        ((kind, inner),) = value.items()
        return kind, inner
    return value.type, value.value


def value_size(value: Any) -> int:
    """Bytes DynamoDB counts for one attribute value (its name not included)."""
    kind, inner = typed(value)
    if sizer := _SCALAR_SIZES.get(kind):
        return sizer(inner)
    if kind == "M":
        return 3 + sum(utf8_size(name) + 1 + value_size(v) for name, v in inner.items())
    # A list, or a set (SS, NS, BS) whose elements are bare values of one type.
    elements = inner if kind == "L" else [{kind[0]: v} for v in inner]
    return 3 + sum(1 + value_size(v) for v in elements)


def item_size(attributes: Mapping[str, Any]) -> int:
    """Bytes DynamoDB counts for an item of attribute values: each name and value."""
    return sum(utf8_size(name) + value_size(value) for name, value in attributes.items())


_SCALAR_KINDS: Final = (("BOOL", bool), ("S", str), ("N", int | float | Decimal), ("B", bytes))


def _attribute_value(value: Any) -> dict[str, Any]:
    """The attribute value a plain Python value is stored as, for counting only."""
    if value is None:
        return {"NULL": True}
    if isinstance(value, Mapping):
        return {"M": {str(k): _attribute_value(v) for k, v in value.items()}}
    if isinstance(value, list | tuple | set | frozenset):
        return {"L": [_attribute_value(v) for v in value]}
    for kind, types in _SCALAR_KINDS:
        if isinstance(value, types):
            return {kind: str(value) if kind == "N" else value}
    return {"S": str(value)}


def plain_size(value: Any) -> int:
    """Bytes DynamoDB counts for a plain Python value (as ``Job.as_item`` holds them)."""
    return value_size(_attribute_value(value))


def plain_item_size(item: Mapping[str, Any]) -> int:
    """Bytes DynamoDB counts for an item of plain Python values."""
    return sum(utf8_size(name) + plain_size(value) for name, value in item.items())
