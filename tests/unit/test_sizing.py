"""DynamoDB's item size as the worker, the bench and the moto limits all count it."""

from decimal import Decimal

from boto3.dynamodb.types import TypeSerializer
from hypothesis import given
from hypothesis import strategies as st

from sume.store.sizing import item_size, plain_item_size, plain_size, value_size


def test_an_item_of_attribute_values_is_counted_by_dynamodb_s_rules():
    item = {
        "job_id": {"S": "job_1"},  # 6 + 5
        "deliveries": {"N": "12"},  # 10 + (2 // 2 + 1)
        "ok": {"BOOL": True},  # 2 + 1
    }
    assert item_size(item) == 11 + 12 + 3


def test_numbers_count_their_significant_digits_only():
    assert value_size({"N": "-0.00120"}) == value_size({"N": "12"}) == 2
    assert value_size({"N": "1E+50"}) == 2
    assert plain_size(Decimal("123.45")) == 4


def test_sets_are_counted_like_lists_which_can_only_overstate_them():
    assert value_size({"SS": ["ab", "c"]}) == value_size({"L": [{"S": "ab"}, {"S": "c"}]})


plain_values = st.recursive(
    # DynamoDB keeps at most 38 significant digits (boto3 refuses more).
    st.none() | st.booleans() | st.integers(-(10**38) + 1, 10**38 - 1) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=12,
)


@given(st.dictionaries(st.text(min_size=1, max_size=8), plain_values, max_size=5))
def test_a_plain_item_counts_as_the_attribute_values_it_is_stored_as(item):
    assert plain_item_size(item) == item_size(
        {name: TypeSerializer().serialize(value) for name, value in item.items()}
    )
