"""Watch and alter AWS API calls with botocore's event hooks.

Every client created while a hook is installed gets it, whichever module
created the client: counting calls, or answering as another store would.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
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
def hooking_new_clients(register: Callable[[Any], None]) -> Iterator[None]:
    """Call ``register(client)`` on every botocore client created inside the block."""
    original = botocore.session.Session.create_client

    def create_client(self: Any, *args: Any, **kwargs: Any) -> Any:
        client = original(self, *args, **kwargs)
        register(client)
        return client

    botocore.session.Session.create_client = create_client
    try:
        yield
    finally:
        botocore.session.Session.create_client = original


@contextmanager
def counting_aws_calls() -> Iterator[AwsCalls]:
    counter = AwsCalls()

    def register(client: Any) -> None:
        counter.clients[client.meta.service_model.service_name] += 1
        client.meta.events.register("before-call", counter.hook)

    with hooking_new_clients(register):
        yield counter


def _drop_stored_item(parsed: dict[str, Any], **_: Any) -> None:
    if parsed.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
        parsed.pop("Item", None)


@contextmanager
def without_all_old() -> Iterator[None]:
    """DynamoDB as a store that ignores ``ReturnValuesOnConditionCheckFailure``.

    dynalite, for one, refuses a conditional write without handing back the
    stored item. Clients created inside the block see every such refusal
    that way.
    """
    with hooking_new_clients(
        lambda client: client.meta.events.register("after-call.dynamodb", _drop_stored_item)
    ):
        yield
