"""The artifact bench's harness over loopback: the origin speaks HTTP as a CDN does, and
each copier moves exactly the origin's bytes. No timing is asserted; speed lives in
``make bench``."""

import http.client
from urllib.parse import urlsplit

import boto3
import pytest

from bench import artifacts
from devstack.origin import BLOCK, CHUNK, Origin
from sume.core import runtime

SIZE = 3 * BLOCK + 777


def get(origin, headers=None, method="GET"):
    parts = urlsplit(origin.url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    connection.request(method, parts.path, headers=headers or {})
    response = connection.getresponse()
    body = response.read()
    connection.close()
    return response.status, {k.lower(): v for k, v in response.getheaders()}, body


def test_a_whole_get_says_ranges_are_served_and_how_to_validate():
    with Origin(SIZE) as origin:
        status, headers, body = get(origin)
        assert status == 200
        assert body == origin.version.content.read()
        assert headers["accept-ranges"] == "bytes"
        assert headers["content-length"] == str(SIZE)
        assert headers["etag"] == origin.version.etag
        assert headers["last-modified"] == origin.version.last_modified


def test_a_range_gets_exactly_its_bytes():
    with Origin(SIZE) as origin:
        whole = origin.version.content.read()
        status, headers, body = get(origin, {"range": f"bytes={BLOCK - 5}-{2 * BLOCK + 4}"})
        assert status == 206
        assert body == whole[BLOCK - 5 : 2 * BLOCK + 5]
        assert headers["content-range"] == f"bytes {BLOCK - 5}-{2 * BLOCK + 4}/{SIZE}"
        status, headers, body = get(origin, {"range": "bytes=-10"})
        assert (status, body) == (206, whole[-10:])
        status, headers, body = get(origin, {"range": f"bytes={SIZE}-"})
        assert (status, body) == (416, b"")
        assert headers["content-range"] == f"bytes */{SIZE}"


def test_head_answers_headers_only():
    with Origin(SIZE) as origin:
        status, headers, body = get(origin, method="HEAD")
        assert (status, body) == (200, b"")
        assert headers["content-length"] == str(SIZE)
        assert origin.served == 0


def test_ranges_switched_off_ignore_the_range_header():
    with Origin(SIZE, ranges=False) as origin:
        status, headers, body = get(origin, {"range": "bytes=0-9"})
        assert status == 200
        assert len(body) == SIZE
        assert "accept-ranges" not in headers
        assert "etag" in headers


def test_the_object_changes_mid_copy_and_if_range_sees_it():
    with Origin(SIZE, change_after=BLOCK) as origin:
        first = origin.version
        status, headers, body = get(origin, {"range": f"bytes=0-{BLOCK + 9}"})
        # The answer in progress keeps its version; the change is for later requests.
        assert status == 206
        assert body == first.content.read(0, BLOCK + 10)
        assert headers["etag"] == first.etag
        second = origin.version
        assert second.etag != first.etag

        stale = {"range": f"bytes={BLOCK + 10}-", "if-range": first.etag}
        status, headers, body = get(origin, stale)
        assert status == 200
        assert headers["etag"] == second.etag
        assert body == second.content.read()

        fresh = {"range": f"bytes={BLOCK + 10}-", "if-range": second.last_modified}
        status, _, body = get(origin, fresh)
        assert (status, body) == (206, second.content.read(BLOCK + 10))
    assert [seen.status for seen in origin.requests] == [206, 200, 206]
    assert origin.requests[1].if_range == first.etag


class FakeTime:
    def __init__(self):
        self.now = 0.0
        self.slept = 0.0

    def clock(self):
        return self.now

    def sleep(self, seconds):
        self.slept += seconds
        self.now += seconds


def test_a_capped_origin_paces_every_piece_of_an_answer():
    time = FakeTime()
    rate = 1_000_000.0
    with Origin(SIZE, rate=rate, clock=time.clock, sleep=time.sleep) as origin:
        status, _, body = get(origin)
    assert (status, len(body)) == (200, SIZE)
    # Only the clock the origin was given moved: every byte but the last piece's waited.
    last_piece = SIZE % CHUNK or CHUNK
    assert time.slept == pytest.approx((SIZE - last_piece) / rate)


@pytest.fixture
def copier_env(monkeypatch, moto_server):
    """The copier's environment, as ``bench.artifacts`` gives it, on moto's server."""
    env = artifacts.copier_environment()
    env["ARTIFACT_PART_BYTES"] = str(5 * 1024 * 1024)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_server)
    s3 = boto3.client("s3", endpoint_url=moto_server)
    if artifacts.BUCKET not in [b["Name"] for b in s3.list_buckets()["Buckets"]]:
        s3.create_bucket(Bucket=artifacts.BUCKET)
    runtime.reset()
    yield env, s3
    runtime.reset()


def job(name, origin, moto_server, key, traced=False):
    return artifacts.Job(name, origin.url, moto_server, key, origin.version.content.size, traced)


@pytest.mark.parametrize("name", sorted(artifacts.COPIERS))
def test_each_copier_moves_exactly_the_origins_bytes(copier_env, moto_server, name, frozen_heap):
    _, s3 = copier_env
    with Origin(SIZE * 2) as origin:
        result = artifacts.Result()
        artifacts.COPIERS[name](job(name, origin, moto_server, f"test/{name}", traced=True), result)
        expected = origin.version.content.sha256()
    assert result.size == SIZE * 2
    assert result.sha256 in (None, expected)
    assert result.python_peak is not None and result.python_peak > 0
    assert result.seconds > 0 and result.rss_peak > 0
    # The upload floor sends the bytes the origin would serve, from memory.
    if name != "download":
        stored = s3.get_object(Bucket=artifacts.BUCKET, Key=f"test/{name}")["Body"].read()
        assert stored == origin.version.content.read()


def test_a_copier_runs_in_a_fresh_process_and_reports_back(copier_env, moto_server):
    env, _ = copier_env
    with Origin(SIZE) as origin:
        result = artifacts.run_copy(job("ours", origin, moto_server, "test/fresh"), env)
        assert result.sha256 == origin.version.content.sha256()
    assert result.size == SIZE
    assert result.python_peak is None
