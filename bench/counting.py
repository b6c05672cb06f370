"""Counting AWS calls with botocore's own event hooks.

The counter is added to botocore's built-in handlers (as moto adds its
stubber), so every session created while it is installed, including the ones
``sume.aws.client`` creates on first use, reports each API call on
``before-call`` and each HTTP attempt on ``before-send``. It is registered
under ``*.*`` so it runs before moto's and the Stubber's handlers, which
answer the call and stop the event there.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from botocore import handlers


class CallCounter:
    def __init__(self) -> None:
        self.calls: list[str] = []
        self.sends = 0
        self.clients = 0

    def on_call(self, model: Any, **_: Any) -> None:
        self.calls.append(f"{model.service_model.service_name}.{model.name}")

    def on_send(self, **_: Any) -> None:
        self.sends += 1

    def on_client(self, **_: Any) -> None:
        self.clients += 1

    def take(self) -> list[str]:
        """The calls since the last ``take``."""
        calls, self.calls = self.calls, []
        self.sends = 0
        return calls

    @contextmanager
    def installed(self) -> Iterator[CallCounter]:
        specs = [
            ("before-call.*.*", self.on_call),
            ("before-send.*.*", self.on_send),
            ("creating-client-class", self.on_client),
        ]
        handlers.BUILTIN_HANDLERS.extend(specs)
        try:
            yield self
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
