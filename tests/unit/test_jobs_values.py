"""The hot path's hand-rolled attribute values agree with boto3's serializer."""

from hypothesis import given
from hypothesis import strategies as st

from sume.jobs import _av, _serializer, from_item

scalars = st.one_of(st.text(max_size=20), st.integers(-(10**15), 10**15), st.booleans(), st.none())
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=12,
)


@given(values)
def test_fast_serialisation_matches_boto3(value):
    assert _av(value) == _serializer.serialize(value)


@given(st.dictionaries(st.text(min_size=1, max_size=8), values, max_size=6))
def test_round_trip_gives_plain_python(item):
    assert from_item({k: _av(v) for k, v in item.items()}) == item


def test_non_integral_numbers_stay_numbers():
    assert from_item({"x": {"N": "1.5"}, "y": {"N": "-3"}}) == {"x": 1.5, "y": -3}
