"""Alter AWS API calls with botocore's event hooks (counting them is ``devstack.counting``'s).

Every client created while a hook is installed gets it, whichever module
created the client: here, answering as another store would.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import botocore.session


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
