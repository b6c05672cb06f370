"""A large event's copy in the other region's bucket: waited for, within a bound."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from botocore.exceptions import EndpointConnectionError

from sume.store import payloads
from sume.store.payloads import PayloadStore, PeerBucket


class Bucket:
    """A client that keeps what is put; ``gate`` holds each put until it is set."""

    def __init__(self, gate: threading.Event | None = None, fail: bool = False) -> None:
        self.objects: dict[tuple[str, str], bytes] = {}
        self._gate = gate
        self._fail = fail

    def put_object(self, *, Bucket: str, Key: str, Body: bytes, **_: Any) -> None:
        if self._gate is not None:
            self._gate.wait(30)
        if self._fail:
            raise EndpointConnectionError(endpoint_url=f"https://{Bucket}.s3.amazonaws.com")
        self.objects[(Bucket, Key)] = Body


def test_both_buckets_get_the_body_under_one_key() -> None:
    here, there = Bucket(), Bucket()
    store = PayloadStore(lambda: here, "here", PeerBucket(lambda: there, "there"))
    ref = store.put("job_1", "x" * 10)
    ((bucket, key),) = here.objects
    assert ref == f"s3://{bucket}/{key}"
    assert list(there.objects) == [("there", key)]


@pytest.mark.parametrize("peer", ["down", "stuck"])
def test_a_peer_that_does_not_take_its_copy_leaves_the_body_here_counted(
    peer: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    counted: list[str] = []
    monkeypatch.setattr(payloads, "count", lambda name, value=1: counted.append(name))
    monkeypatch.setattr(payloads, "PEER_COPY_SECONDS", 0.05)
    gate = threading.Event()
    here = Bucket()
    there = Bucket(fail=True) if peer == "down" else Bucket(gate=gate)
    store = PayloadStore(lambda: here, "here", PeerBucket(lambda: there, "there"))
    try:
        ref = store.put("job_1", "x" * 10)
    finally:
        gate.set()
    assert ref.startswith("s3://here/events/job_1/")
    assert len(here.objects) == 1
    assert counted == ["PayloadsInOneRegion"]


def test_this_regions_failed_write_raises_whatever_the_peer() -> None:
    here, there = Bucket(fail=True), Bucket()
    store = PayloadStore(lambda: here, "here", PeerBucket(lambda: there, "there"))
    with pytest.raises(EndpointConnectionError):
        store.put("job_1", "x" * 10)
