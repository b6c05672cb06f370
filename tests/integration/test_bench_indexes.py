"""The index bench: each job's life through the real handlers, to the ending it writes."""

from __future__ import annotations

from bench import indexes
from sume.core.names import DUE_INDEX, DUE_INDEX_BEFORE


def test_every_life_runs_to_its_ending_and_a_completed_job_costs_the_due_index_3_units():
    # Two due shards, as in test_bench_jobs: the lives' writes do not depend on how many.
    report = indexes.measure(shards=2)
    assert [life.label for life in report.lives if not life.ended] == []
    endings = {life.label: life.ending for life in report.lives}
    assert endings["registered, never found: lost, announced"].startswith("lost, out of due-work")
    assert endings["registered, found by a status poll, processed"].startswith("processed")
    # The record puts the entry, the claim changes its state and lease (not its
    # key), the two progress writes change nothing it holds, the finish removes it.
    assert indexes.completed_due_units(report) == 3
    completed = next(life for life in report.lives if life.label == indexes.COMPLETED)
    assert completed.phases["worker"].index_writes[DUE_INDEX] == 2
    # The same writes, priced on the index as it was (ALL): the progress writes count.
    assert completed.total(DUE_INDEX_BEFORE)[0] > completed.total(DUE_INDEX)[0]
