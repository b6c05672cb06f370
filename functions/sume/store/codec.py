"""The item's DynamoDB attribute values, both ways: a value as an expression
gives it, and a stored item read into a ``Job``.
"""

from __future__ import annotations

import enum
import typing
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer

from sume.store.job import Job

_serializer = TypeSerializer()
_deserializer = TypeDeserializer()


def attribute_value(value: Any) -> dict[str, Any]:
    # Strings and whole numbers are nearly every value on the hot path; the
    # general serializer costs about 10 us each (bench), these two lines ~1 us.
    if type(value) is str:
        return {"S": value}
    if type(value) is int:
        return {"N": str(value)}
    # A duplicate's ring of delivery ids: a list of strings, element by element as above.
    if type(value) is list:
        return {"L": [attribute_value(v) for v in value]}
    return _serializer.serialize(value)


def _plain(value: Any) -> Any:
    if isinstance(value, Decimal):
        # A fraction stays a Decimal: a float would round metadata's numbers.
        return int(value) if value == value.to_integral_value() else value
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, set):
        return sorted(_plain(v) for v in value)
    return value


def _from_av(value: dict[str, Any]) -> Any:
    # A duplicate delivery reads the stored item back on the hot path; its
    # attributes are almost all strings and whole numbers (see attribute_value).
    if "S" in value:
        return value["S"]
    if "N" in value and value["N"].lstrip("-").isdigit():
        return int(value["N"])
    return _plain(_deserializer.deserialize(value))


_MISFIT = object()


def _reader(hint: Any) -> Callable[[Any], Any]:
    """Reads a plain value into a field of type ``hint``; ``_MISFIT`` when it is not one.

    Types are matched exactly, so a flag is no count and a fraction no time.
    """
    kinds = [
        typing.get_origin(a) or a for a in typing.get_args(hint) or (hint,) if a is not type(None)
    ]
    plain = tuple(k for k in kinds if not issubclass(k, enum.Enum))
    members = {m.value: m for k in kinds if issubclass(k, enum.Enum) for m in k}

    def read(value: Any) -> Any:
        if type(value) in plain:
            return value
        return members.get(value, _MISFIT) if type(value) is str else _MISFIT

    return read


_READERS = {
    name: _reader(hint) for name, hint in typing.get_type_hints(Job).items() if name != "other"
}


def job_from_item(item: dict[str, Any]) -> Job:
    """The one conversion of a stored item (DynamoDB's attribute values) into a ``Job``."""
    known: dict[str, Any] = {}
    other: dict[str, Any] = {}
    for name, stored in item.items():
        value = _from_av(stored)
        read = _READERS.get(name)
        typed = read(value) if read else _MISFIT
        if typed is _MISFIT:
            other[name] = value
        else:
            known[name] = typed
    return Job(**known, other=other)
