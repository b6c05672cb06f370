"""Values on their way into and out of the jobs table: the hand-rolled
serialisation agrees with boto3's, and a ``Job`` is its item, typed, with
nothing lost on the way."""

import re
from dataclasses import fields
from pathlib import Path

from boto3.dynamodb.types import TypeSerializer
from hypothesis import given
from hypothesis import strategies as st

from sume.store.job import Job, JobAttr, Source, State
from sume.store.jobs import JobsTable

serializer = TypeSerializer()
scalars = st.one_of(st.text(max_size=20), st.integers(-(10**15), 10**15), st.booleans(), st.none())
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=12,
)
attribute_names = st.one_of(st.sampled_from(sorted(JobAttr)), st.text(min_size=1, max_size=8))


class Table:
    """Just enough of a DynamoDB client: hands back one stored item, keeps each update."""

    def __init__(self, item=None):
        self.item = item
        self.updates = []

    def get_item(self, **_):
        return {"Item": self.item} if self.item else {}

    def update_item(self, **request):
        self.updates.append(request)
        return {}


def stored(item):
    """The job a table holding ``item`` (plain Python) hands back."""
    table = Table({name: serializer.serialize(value) for name, value in item.items()})
    job = JobsTable(table, "jobs", 4).get(item["job_id"])
    assert job is not None
    return job


@given(values)
def test_written_values_are_serialised_as_boto3_would(value):
    table = Table()
    jobs = JobsTable(table, "jobs", 4)
    jobs.finish("j", "c", State.PROCESSED, 1, 2, {"outcome": value}, window_at=None)
    (update,) = table.updates
    assert update["ExpressionAttributeValues"][":d_outcome"] == serializer.serialize(value)


@given(st.text(min_size=1, max_size=8), st.dictionaries(attribute_names, values, max_size=8))
def test_a_job_gives_back_its_item_exactly_as_stored(job_id, attributes):
    item = {**attributes, "job_id": job_id}
    assert stored(item).as_item() == item


def test_known_attributes_are_typed_fields():
    job = stored({"job_id": "j", "state": "processing", "source": "poll", "attempts": 2})
    assert (job.state, job.source, job.attempts, job.other) == (
        State.PROCESSING,
        Source.POLL,
        2,
        {},
    )


def test_values_not_of_their_fields_type_stay_under_their_names():
    item = {"job_id": "j", "state": "paused", "attempts": True, "error": None, "colour": "red"}
    job = stored(item)
    assert (job.state, job.attempts, job.error) == (None, None, None)
    assert job.other == {"state": "paused", "attempts": True, "error": None, "colour": "red"}


def test_non_integral_numbers_stay_numbers():
    table = Table({"job_id": {"S": "j"}, "x": {"N": "1.5"}, "y": {"N": "-3"}})
    job = JobsTable(table, "jobs", 4).get("j")
    assert job is not None
    assert job.other == {"x": 1.5, "y": -3}


def test_the_operators_list_of_attributes_is_the_job_s_fields():
    # docs/job-item.md's table: its first column names each attribute it explains.
    doc = (Path(__file__).resolve().parents[2] / "docs" / "job-item.md").read_text()
    rows = [line.split("|")[1] for line in doc.splitlines() if line.startswith("| `")]
    documented = {name for cell in rows for name in re.findall(r"`([a-z_]+)`", cell)}
    assert documented == {f.name for f in fields(Job)} - {"other"}
    assert documented == set(JobAttr)
