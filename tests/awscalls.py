"""Count AWS API calls with botocore's event hooks.

Every client created while the counter is installed gets a ``before-call``
hook, so a call is counted whichever module created the client.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import botocore.session


class AwsCalls:
    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.clients: Counter[str] = Counter()

    def hook(self, model: Any, **_: Any) -> None:
        self.calls[f"{model.service_model.service_name}.{model.name}"] += 1

    @property
    def total(self) -> int:
        return sum(self.calls.values())

    def reset(self) -> None:
        self.calls.clear()


@contextmanager
def counting_aws_calls() -> Iterator[AwsCalls]:
    counter = AwsCalls()
    original = botocore.session.Session.create_client

    def create_client(self: Any, *args: Any, **kwargs: Any) -> Any:
        client = original(self, *args, **kwargs)
        counter.clients[client.meta.service_model.service_name] += 1
        client.meta.events.register("before-call", counter.hook)
        return client

    botocore.session.Session.create_client = create_client
    try:
        yield counter
    finally:
        botocore.session.Session.create_client = original
