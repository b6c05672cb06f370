"""Counting AWS calls with botocore's own event hooks: the tests' and the bench's one counter.

The counter is added to botocore's built-in handlers (as moto adds its
stubber), so every session created while it is installed, including the ones
``sume.core.aws.client`` creates on first use, reports each API call on
``before-call`` and each client it creates. A session made before it was
installed is not watched: forget the cached one (the handlers' reset) inside
the block. It is registered under ``*.*`` so it runs before moto's and the
Stubber's handlers, which answer the call and stop the event there.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from botocore import handlers


class CallCounter:
    def __init__(self) -> None:
        self.calls: list[str] = []
        """Each API call, in order, as ``service.Operation`` (``dynamodb.UpdateItem``)."""
        self.clients: list[str] = []
        """The service id of each client created (``dynamodb``, ``secrets-manager``)."""

    def on_call(self, model: Any, **_: Any) -> None:
        self.calls.append(f"{model.service_model.service_name}.{model.name}")

    def on_client(self, event_name: str, **_: Any) -> None:
        self.clients.append(event_name.rpartition(".")[2])

    def take(self) -> list[str]:
        """The calls since the last ``take``."""
        calls, self.calls = self.calls, []
        return calls

    @contextmanager
    def installed(self) -> Iterator[CallCounter]:
        specs: list[tuple[str, Callable[..., None]]] = [
            ("before-call.*.*", self.on_call),
            ("creating-client-class", self.on_client),
        ]
        with builtin_handlers(specs):
            yield self


@contextmanager
def builtin_handlers(specs: list[tuple[str, Callable[..., None]]]) -> Iterator[None]:
    """``specs`` registered on every botocore session made inside the block."""
    handlers.BUILTIN_HANDLERS.extend(specs)
    try:
        yield
    finally:
        for spec in specs:
            handlers.BUILTIN_HANDLERS.remove(spec)


def short(calls: list[str]) -> str:
    """``[dynamodb.Query, dynamodb.Query, sqs.SendMessage]`` -> ``Query x2 + SendMessage``."""
    runs: list[list[Any]] = []
    for call in calls:
        name = call.split(".", 1)[1]
        if runs and runs[-1][0] == name:
            runs[-1][1] += 1
        else:
            runs.append([name, 1])
    return " + ".join(name if n == 1 else f"{name} x{n}" for name, n in runs) or "-"
