"""Make moto's EventBridge carry an event's numbers as they were written, as AWS does.

moto parses each entry's ``Detail`` with ``json.loads`` and writes the event
to its targets with ``json.dumps``, so a number with more digits than a
double holds arrives rounded (``12345678901234567.89`` becomes
``12345678901234568``), once on the way to the registrations queue and again
on the way out of the worker's announcement. Here moto's events module reads
every fraction as a float that keeps its text and writes it back with that
text: rules still match numbers by value, and targets receive every digit.
"""

from __future__ import annotations

import json
import types
from typing import Any

from devstack import moto_atomic

_installed = False


class WrittenFloat(float):
    """A JSON fraction: compares as the float, serialises as the text it was read from."""

    text: str

    def __new__(cls, text: str) -> WrittenFloat:
        number = super().__new__(cls, text)
        number.text = text
        return number

    def __reduce__(self) -> tuple[type[WrittenFloat], tuple[str]]:
        return (WrittenFloat, (self.text,))

    def __repr__(self) -> str:
        return self.text

    __str__ = __repr__


class _WrittenEncoder(json.JSONEncoder):
    """``json``'s own encoder, but a ``WrittenFloat`` is written with its text."""

    def iterencode(self, o: Any, _one_shot: bool = False) -> Any:
        plain = json.JSONEncoder(allow_nan=self.allow_nan)

        def floatstr(value: float) -> str:
            return value.text if isinstance(value, WrittenFloat) else plain.encode(value)

        encode = (
            json.encoder.encode_basestring_ascii
            if self.ensure_ascii
            else json.encoder.encode_basestring
        )
        return json.encoder._make_iterencode(  # type: ignore[attr-defined]
            {} if self.check_circular else None,
            self.default,
            encode,
            self.indent,
            floatstr,
            self.key_separator,
            self.item_separator,
            self.sort_keys,
            self.skipkeys,
            _one_shot,
        )(o, 0)


def loads(text: str | bytes, **kwargs: Any) -> Any:
    return json.loads(text, parse_float=WrittenFloat, **kwargs)


def dumps(value: Any, **kwargs: Any) -> str:
    return json.dumps(value, cls=_WrittenEncoder, **kwargs)


def install() -> None:
    """Give moto's events models and template parser this ``json``, once per process."""
    global _installed  # noqa: PLW0603 - the patch is process-wide, like moto's backends
    with moto_atomic.LOCK:
        if _installed:
            return
        from moto.events import models, utils

        faithful = types.ModuleType("json")
        faithful.__dict__.update(vars(json))
        faithful.loads = loads  # type: ignore[attr-defined]
        faithful.dumps = dumps  # type: ignore[attr-defined]
        # models parses Detail and writes to targets; utils fills the target's template.
        models.json = faithful
        utils.json = faithful
        _installed = True
