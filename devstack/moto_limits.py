"""Make moto refuse what AWS refuses, where this project's correctness rests on it.

moto stores what AWS would refuse: DynamoDB items nested deeper than 32
levels or larger than 400 KB (and it applies part of an over-size UpdateItem
before refusing it), SQS message bodies with characters outside XML's
allowed set, EventBridge entries of 1 MB or more, S3 keys over 1,024 bytes, and it
answers a Query of a global secondary index whose ProjectionExpression names an
attribute the index does not project (AWS refuses it: "... does not project
[...]"); a filter naming such an attribute is refused here too (the filter
is judged on the index entry, where it is absent, so it could only mislead). Code
that passes on moto would then fail only in AWS, after deployment. The
backends are patched (not botocore), so the limits hold for in-process
``mock_aws`` and for moto's threaded server alike. One gap the other way:
moto delivers events to rule targets without their ``account``, which AWS
always sets and the published schemas require; it is added here, and
``devstack.moto_numbers`` (installed with these) keeps an event's numbers as
they were written.

Where AWS documents a size as approximate, the estimate here rounds up, so a
test never accepts what AWS might refuse; moto's own 405,000-byte item check
stays in place underneath.
"""

from __future__ import annotations

import copy
import functools
import inspect
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

from devstack import moto_atomic, moto_numbers, moto_replay
from sume.core.bounded import DYNAMODB_MAX_DEPTH, nests_deeper
from sume.store.sizing import MAX_ITEM_BYTES, item_size, typed, utf8_size

# EventBridge takes events up to 1 MB since 2026-01-29 (256 KB before; AWS
# Compute blog, "serverless services now support payloads up to 1 MB"). Read
# as 1,000,000 bytes, the smaller of its two readings, so nothing passes here
# that AWS might refuse. SQS's 1 MiB message is moto's own limit already.
EVENTBRIDGE_MAX_ENTRIES_BYTES: Final = 1_000_000
S3_MAX_KEY_BYTES: Final = 1024

NESTING_MESSAGE: Final = (
    "Nesting Levels have exceeded supported limits: "
    "Attributes in the item have nested levels beyond supported limit"
)
EVENTS_SIZE_MESSAGE: Final = "Total size of the entries in the request is over the limit."
SQS_CHARACTERS_MESSAGE: Final = (
    "Invalid characters found. Valid unicode characters are #x9 | #xA | #xD | "
    "#x20 to #xD7FF | #xE000 to #xFFFD | #x10000 to #x10FFFF"
)
S3_KEY_MESSAGE: Final = "Your key is too long"

# SQS message bodies are XML character data (the SQS docs list exactly this set).
_SQS_FORBIDDEN = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")

_installed = False


def install() -> None:
    """Patch moto's DynamoDB, EventBridge, SQS and S3 backends once per process."""
    global _installed  # noqa: PLW0603 - the patch is process-wide, like moto's backends
    with moto_atomic.LOCK:
        if _installed:
            return
        _limit_dynamodb()
        _limit_events()
        _whole_events()
        moto_numbers.install()
        moto_replay.install()
        _limit_sqs()
        _limit_s3()
        _installed = True


def _children(value: Any) -> Iterable[Any]:
    kind, inner = typed(value)
    if kind == "M":
        return inner.values()
    if kind == "L":
        return inner
    return ()


def too_deep(value: Any, levels: int = DYNAMODB_MAX_DEPTH) -> bool:
    """True if an attribute value nests more than ``levels`` levels (a scalar is one).

    The rule is the domain's (``sume.core.bounded.nests_deeper``, which the
    registration checks apply to metadata), walked here over attribute values.
    """
    return nests_deeper(value, _children, levels)


def put_events_size(entries: Iterable[Mapping[str, Any]]) -> int:
    """Bytes EventBridge counts for PutEvents entries.

    AWS's rule ("Calculating Amazon EventBridge PutEvents event entry size"):
    14 bytes for Time if given, and the UTF-8 bytes of Source, DetailType,
    Detail and each Resources entry. EventBridge and EventBusName do not count.
    """
    total = 0
    for entry in entries:
        total += 14 if entry.get("Time") is not None else 0
        fields = ("Source", "DetailType", "Detail")
        total += sum(utf8_size(entry.get(field) or "") for field in fields)
        total += sum(utf8_size(resource) for resource in entry.get("Resources") or () if resource)
    return total


def _guard(cls: type, name: str, check: Callable[[dict[str, Any]], None]) -> None:
    """Run ``check`` on a backend method's bound arguments before the method itself."""
    original = getattr(cls, name)
    signature = inspect.signature(original)

    @functools.wraps(original)
    def guarded(self: Any, *args: Any, **kwargs: Any) -> Any:
        check(signature.bind(self, *args, **kwargs).arguments)
        return original(self, *args, **kwargs)

    setattr(cls, name, guarded)


def _limit_dynamodb() -> None:
    from moto.dynamodb.exceptions import (
        ItemSizeTooLarge,
        ItemSizeToUpdateTooLarge,
        MockValidationException,
    )
    from moto.dynamodb.models import DynamoDBBackend

    def refuse_deep(values: Mapping[str, Any] | None) -> None:
        # Expression values are checked up front, as several AWS regions do:
        # a deep value only in a condition is then refused, never compared.
        if any(too_deep(value) for value in (values or {}).values()):
            raise MockValidationException(NESTING_MESSAGE)

    def check_put(call: dict[str, Any]) -> None:
        refuse_deep(call.get("expression_attribute_values"))
        refuse_deep(call["item_attrs"])
        if item_size(call["item_attrs"]) > MAX_ITEM_BYTES:
            raise ItemSizeTooLarge()

    _guard(DynamoDBBackend, "put_item", check_put)

    update_item = DynamoDBBackend.update_item
    signature = inspect.signature(update_item)

    @functools.wraps(update_item)
    def limited_update_item(self: Any, *args: Any, **kwargs: Any) -> Any:
        call = signature.bind(self, *args, **kwargs).arguments
        refuse_deep(call.get("expression_attribute_values"))
        with moto_atomic.LOCK:
            table = self.get_table(call["table_name"])
            hash_key, range_key = self.get_keys_value(table, call["key"])
            # moto updates the stored item in place, one action at a time, and
            # creates a missing item before the first action: a refusal half
            # way through would leave a changed item. AWS changes nothing.
            before = copy.deepcopy(table.get_item(hash_key, range_key))
            try:
                item = update_item(self, *args, **kwargs)
                refuse_deep(item.attrs)
                if item_size(item.attrs) > MAX_ITEM_BYTES:
                    raise ItemSizeToUpdateTooLarge()
            except Exception:
                _restore(table, hash_key, range_key, before)
                raise
            return item

    DynamoDBBackend.update_item = limited_update_item  # type: ignore[method-assign]

    def projected_only(call: dict[str, Any]) -> None:
        index_name = call.get("index_name")
        if not index_name:
            return
        table = call["self"].get_table(call["table_name"])
        index = next((i for i in table.global_indexes if i.name == index_name), None)
        if index is None or index.projection.get("ProjectionType", "ALL") == "ALL":
            return
        held = {*index.table_key_attrs, *index.schema_key_attrs}
        held.update(index.projection.get("NonKeyAttributes", []))
        paths = call.get("projection_expressions") or call.get("projection_expression") or []
        named = {path[0] for path in paths}
        named |= expression_attributes(call.get("filter_expression"), call.get("expr_names"))
        if missing := sorted(named - held):
            raise MockValidationException(
                "One or more parameter values were invalid: Global secondary index "
                f"{index_name} does not project [{', '.join(missing)}]"
            )

    _guard(DynamoDBBackend, "query", projected_only)
    _guard(DynamoDBBackend, "scan", projected_only)


# What a filter expression may name besides attributes.
_EXPRESSION_WORDS = frozenset(
    [
        "AND",
        "OR",
        "NOT",
        "BETWEEN",
        "IN",
        "attribute_exists",
        "attribute_not_exists",
        "attribute_type",
        "begins_with",
        "contains",
        "size",
    ]
)
_EXPRESSION_NAME = re.compile(r"(?<![:#\w])#?[A-Za-z_][A-Za-z0-9_]*")


def expression_attributes(expression: str | None, names: Mapping[str, str] | None) -> set[str]:
    """The attributes an expression names, its #aliases resolved (top-level names only)."""
    found = set()
    for token in _EXPRESSION_NAME.findall(expression or ""):
        if token.startswith("#"):
            found.add((names or {}).get(token, token))
        elif token not in _EXPRESSION_WORDS:
            found.add(token)
    return found


def _restore(table: Any, hash_key: Any, range_key: Any, before: Any) -> None:
    items = table.items if range_key is None else table.items[hash_key]
    key = hash_key if range_key is None else range_key
    if before is None:
        items.pop(key, None)
    else:
        items[key] = before


def _limit_events() -> None:
    from moto.events.exceptions import ValidationException
    from moto.events.models import EventsBackend

    def check(call: dict[str, Any]) -> None:
        # AWS refuses the whole call, not the entry: "the total entry size
        # must be less than" the limit.
        if put_events_size(call["events"]) >= EVENTBRIDGE_MAX_ENTRIES_BYTES:
            raise ValidationException(EVENTS_SIZE_MESSAGE)

    _guard(EventsBackend, "put_events", check)


def _whole_events() -> None:
    from moto.events.utils import EventTemplateParser

    template = EventTemplateParser.DEFAULT_EVENT_INPUT_TEMPLATE
    if '"account"' not in template:
        EventTemplateParser.DEFAULT_EVENT_INPUT_TEMPLATE = template.replace(
            '"source": "<source>",', '"source": "<source>", "account": "<account>",'
        )


def _limit_sqs() -> None:
    from moto.sqs.exceptions import SQSException
    from moto.sqs.models import SQSBackend

    def refuse_characters(bodies: Iterable[str]) -> None:
        if any(_SQS_FORBIDDEN.search(body) for body in bodies):
            raise SQSException("InvalidMessageContents", SQS_CHARACTERS_MESSAGE)

    _guard(SQSBackend, "send_message", lambda call: refuse_characters([call["message_body"]]))
    # A batch is refused whole (moto validates every entry before sending
    # any); this project sends no batches, so AWS's per-entry answer is moot.
    _guard(
        SQSBackend,
        "send_message_batch",
        lambda call: refuse_characters(e["MessageBody"] for e in call["entries"].values()),
    )


def _limit_s3() -> None:
    from moto.s3.exceptions import S3ClientError
    from moto.s3.models import S3Backend

    def key_check(argument: str) -> Callable[[dict[str, Any]], None]:
        def check(call: dict[str, Any]) -> None:
            if utf8_size(call[argument]) > S3_MAX_KEY_BYTES:
                raise S3ClientError("KeyTooLongError", S3_KEY_MESSAGE)

        return check

    _guard(S3Backend, "put_object", key_check("key_name"))
    _guard(S3Backend, "create_multipart_upload", key_check("key_name"))
    _guard(S3Backend, "copy_object", key_check("dest_key_name"))
