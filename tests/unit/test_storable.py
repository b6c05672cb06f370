"""What DynamoDB can store of a JSON value from outside (``sume.core.bounded.storable``), and
the registration rules built on it (``sume.polling.registry``), without a table."""

from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sume.core.bounded import (
    DYNAMODB_MAX_DEPTH,
    NotStorable,
    encode,
    json_children,
    nests_deeper,
    storable,
)
from sume.net.policy import URL_REFUSALS, UrlPolicy
from sume.polling.registering import INVALID_REGISTRATION, InvalidRegistration, Registry

DIGITS_38 = 12345678901234567890123456789012345678
DIGITS_39 = 123456789012345678901234567890123456789


def levels(count: int, leaf: Any = "x") -> Any:
    """A value DynamoDB counts ``count`` levels deep: ``count - 1`` maps around ``leaf``."""
    value = leaf
    for _ in range(count - 1):
        value = {"a": value}
    return value


def test_depth_counts_the_value_itself_as_the_first_level() -> None:
    assert not nests_deeper(levels(DYNAMODB_MAX_DEPTH), json_children)
    assert nests_deeper(levels(DYNAMODB_MAX_DEPTH + 1), json_children)
    # An empty map or list is one level, as a scalar is.
    assert not nests_deeper(levels(DYNAMODB_MAX_DEPTH, {}), json_children)
    assert nests_deeper(levels(DYNAMODB_MAX_DEPTH, [[]]), json_children)
    assert nests_deeper({"shallow": 1, "deep": [levels(DYNAMODB_MAX_DEPTH)]}, json_children)
    assert not nests_deeper({}, json_children, levels=1)


def test_depth_past_any_recursion_limit_is_refused_without_recursing() -> None:
    deep = levels(200_000)
    with pytest.raises(NotStorable, match="nests deeper than DynamoDB's 32 levels"):
        storable(deep, "metadata")


@pytest.mark.parametrize(
    ("number", "stored"),
    [
        (DIGITS_38, DIGITS_38),
        (-DIGITS_38, -DIGITS_38),
        (Decimal("12345678901234567.89"), Decimal("12345678901234567.89")),
        # Leading and trailing zeros are no digits of precision.
        (Decimal("1." + "0" * 60), 1),
        (Decimal("0.000" + "1" * 38), Decimal("0.000" + "1" * 38)),
        (10**50, Decimal("1E+50")),
        (Decimal("1E-130"), Decimal("1E-130")),
        (Decimal("-9." + "9" * 37 + "E+125"), Decimal("-9." + "9" * 37 + "E+125")),
        (Decimal("-0E-500"), 0),
        (0.1, Decimal("0.1")),
        (2.5e-7, Decimal("2.5E-7")),
        (True, True),
    ],
)
def test_numbers_dynamodb_keeps_are_stored_to_the_last_digit(number: Any, stored: Any) -> None:
    value = storable({"n": number}, "metadata")["n"]
    assert value == stored
    assert type(value) is type(stored)


@pytest.mark.parametrize(
    ("number", "message"),
    [
        (DIGITS_39, "39 significant digits"),
        (Decimal(f"{DIGITS_39}E-20"), "39 significant digits"),
        (Decimal("1e-200"), r"magnitude 1E-200"),
        (Decimal("1e126"), r"magnitude 1E\+126"),
        (1e-131, r"magnitude 1E-131"),
        (-(10**126), r"magnitude 1E\+126"),
        (10**5000, r"magnitude 1E\+5000"),
        (float("inf"), "not a finite number"),
        (Decimal("NaN"), "not a finite number"),
        # boto3 reads and writes numbers in a context that ends at 1E-165.
        (Decimal("1." + "2" * 37 + "E-130"), "too many digits"),
    ],
    ids=[
        "39_digits",
        "39_digits_fraction",
        "1e-200",
        "1e126",
        "float_1e-131",
        "-1e126",
        "10**5000",
        "inf",
        "nan",
        "38_digits_near_1e-130",
    ],
)
def test_numbers_dynamodb_would_refuse_or_round_are_refused(number: Any, message: str) -> None:
    with pytest.raises(NotStorable, match=message):
        storable({"order": {"total": number}}, "metadata")


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"": 1}, r"^metadata: a key is empty"),
        ({"a": {"": 1}}, r'^metadata\["a"\]: a key is empty'),
        ({1: "one"}, "a key is not a string"),
        ({"a\ud800": 1}, "lone surrogate"),
        ({"a": ["ok", "b\udfff"]}, r'^metadata\["a"\]\[1\]: a lone surrogate'),
        ({"when": object()}, "object is not a JSON value"),
        ({"tags": {"a", "b"}}, "set is not a JSON value"),
        ({"k" * 10_000: [1.5e300]}, r"^metadata\[\"kkk"),
    ],
)
def test_what_dynamodb_refuses_is_refused_saying_where(value: Any, message: str) -> None:
    with pytest.raises(NotStorable, match=message) as refused:
        storable(value, "metadata")
    assert len(str(refused.value)) < 512


def test_containers_are_copied_as_json_holds_them() -> None:
    given_value = {"tags": ("a", "b"), "nested": {"list": [None, False, "s", 7]}}
    stored = storable(given_value, "metadata")
    assert stored == {"tags": ["a", "b"], "nested": {"list": [None, False, "s", 7]}}
    assert stored["nested"] is not given_value["nested"]


def test_decimals_are_encoded_as_the_json_numbers_they_are() -> None:
    stored = storable({"price": Decimal("12345678901234567.89"), "tiny": Decimal("1E-130")}, "m")
    assert encode(stored, 1000).text == '{"price":12345678901234567.89,"tiny":1E-130}'
    assert not encode(stored, 1000).cut


class Accepting:
    """Stands in for the jobs table: every registration that reaches it is new."""

    def __init__(self) -> None:
        self.metadata: list[Any] = []

    def register(self, job_id: str, status_url: str, metadata: Any, **kwargs: Any) -> bool:
        self.metadata.append(metadata)
        return True


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(10**45), 10**45)
    | st.floats()
    | st.decimals(allow_nan=True, allow_infinity=True)
    | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(
    job_id=st.one_of(st.text(max_size=8), st.integers(), st.none()),
    url=st.one_of(st.text(max_size=30), st.just("https://api.sume.example/v1/jobs/j")),
    metadata=st.one_of(json_values, st.dictionaries(st.text(max_size=4), json_values)),
)
def test_expect_refuses_only_with_its_documented_error(job_id, url, metadata) -> None:
    table = Accepting()
    policy = UrlPolicy(False, False, ("api.sume.example",))
    registry = Registry(table, 900, url_policy=policy)  # type: ignore[arg-type]
    try:
        registry.expect(job_id, url, metadata)
    except InvalidRegistration as refused:
        assert refused.reason in (INVALID_REGISTRATION, *URL_REFUSALS)
        assert table.metadata == []
    else:
        (stored,) = table.metadata
        assert stored is None or storable(stored, "metadata") == stored
