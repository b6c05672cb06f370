"""Section 6, artifact copies: ours against the floors for the same bytes.

A generated object (``devstack.origin``), served on loopback at full speed and capped per
connection as CDNs cap each, is copied into S3 on moto's server, each server a process of its
own. Each run of a case is a fresh process (``python -m bench.artifacts JOB``) importing only
what its copier uses: its RSS is its own.

The floors: download only (the worker's ``SafeHttp``) and upload only (from memory through
s3transfer, the best boto3 offers). A copy overlapping the two takes no less than the slower,
so ``max(download, upload)`` is ours' limit. s3transfer's upload of the stream, with ours'
memory bound, is the alternative ``sume.working.transfer`` was measured against. A copy ends
with the upload of the parts read last, as long as moto takes: at 2 MB/s a copy of a part per
connection (the least that uses them all) lasts long enough for that tail to be small.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import io
import json
import os
import resource
import statistics
import sys
import time
import tracemalloc
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

from bench import cost
from bench import harness as h
from devstack import servers
from devstack.origin import Content
from infra.spec import WORKER_MEMORY_MB, WORKER_TIMEOUT, worker_queue_environment
from sume.core.names import Env
from sume.net.fetch import SafeHttp
from sume.working.settings import WorkerSettings

MiB = h.MiB
SIZE, QUICK_SIZE = 128 * MiB, 32 * MiB
SEED = 1
BUCKET = "sume-bench-artifacts"
FULL_SPEED_TARGET, RANGED_TARGET = 1.2, 3.0
FRAMING_PER_UPLOAD = 2 * MiB
"""Ours' memory bound beyond its parts, per upload in flight: botocore reads a body in 1 MiB
pieces (checksum, signature, framing) and holds a piece and its framed copy at once, plus what
the sender reads (16 KiB at a time: 2.0 MiB measured, a 5 MiB part sent under tracemalloc)."""
FULL, CAPPED = "full speed", "capped at 25 MB/s per connection"
SLOW = "capped at 2 MB/s per connection"
SPEEDS = {FULL: None, CAPPED: 25_000_000, SLOW: 2_000_000}  # bytes/s on each connection
LABELS = {
    "download": "download only (floor): SafeHttp, one connection",
    "upload": "upload only (floor): s3transfer upload_fileobj",
    "one stream": "ours: ArtifactStore.copy held to one stream",
    "ranged": "ours: ArtifactStore.copy as deployed, ranged on {} connections",
    "s3transfer": "s3transfer upload_fileobj of the stream, ours' memory bound",
}
Case = tuple[str, str | None]  # a key of LABELS, a speed (None: the upload floor's)
CASES: list[Case] = [
    ("upload", None),
    *[(key, speed) for speed in (FULL, CAPPED) for key in ("download", "one stream", "ranged")],
    ("s3transfer", FULL),
    ("one stream", SLOW),
    ("ranged", SLOW),
]


@dataclass(frozen=True)
class Job:
    copier: str
    url: str
    s3_endpoint: str
    key: str
    size: int
    traced: bool = False


@dataclass
class Result:
    seconds: float = 0.0
    cpu_seconds: float = 0.0
    size: int = 0
    sha256: str | None = None
    python_peak: int | None = None
    rss_before: int = 0
    rss_peak: int = 0


@contextlib.contextmanager
def _timed(result: Result, traced: bool) -> Iterator[None]:
    """The copy's own time, CPU, RSS and (``traced``) Python peak into ``result``; what
    comes before it (imports, clients, the upload floor's bytes) is not counted."""
    gc.collect()
    result.rss_before = _status_bytes("VmRSS")
    # "5" resets the resident high-water mark (VmHWM): the peak is the copy's.
    with contextlib.suppress(OSError), open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")
    if traced:
        tracemalloc.start()
    wall, cpu = time.perf_counter(), time.process_time()
    yield
    result.seconds, result.cpu_seconds = time.perf_counter() - wall, time.process_time() - cpu
    result.python_peak = tracemalloc.get_traced_memory()[1] if traced else None
    tracemalloc.stop()
    result.rss_peak = _status_bytes("VmHWM")


def _status_bytes(field: str) -> int:
    """A ``/proc/self/status`` figure (Linux), else the process's peak (``ru_maxrss``). Not
    ``ru_maxrss`` on Linux: a child started by exec inherits in it the parent's peak."""
    with contextlib.suppress(OSError), open("/proc/self/status") as status:
        return next(int(ln.split()[1]) * 1024 for ln in status if ln.startswith(field + ":"))
    scale = 1 if sys.platform == "darwin" else 1024  # bytes on macOS, else KiB
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale


def _download(job: Job, result: Result) -> None:
    http = SafeHttp.for_settings(WorkerSettings.from_env())
    with _timed(result, job.traced), http.open(job.url) as response:
        result.size = sum(len(chunk) for chunk in response.iter_bytes())


def _upload(job: Job, result: Result) -> None:
    from sume.core import aws

    s3, data = aws.client("s3", patient=True), Content(job.size, SEED).read()
    config = _transfer_config(WorkerSettings.from_env().part_size_bytes)
    with _timed(result, job.traced):
        s3.upload_fileobj(io.BytesIO(data), BUCKET, job.key, Config=config)
    result.size = len(data)


def _ours(job: Job, result: Result) -> None:
    from sume.working.compose import build_artifact_store

    store = build_artifact_store(WorkerSettings.from_env())
    with _timed(result, job.traced):
        stored = store.copy(job.url, job.key)
    result.size, result.sha256 = stored.size, stored.sha256


class _HashedReader:
    """A response as the non-seekable file s3transfer reads, hashed on the way."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._chunks, self._left = chunks, b""
        self.digest, self.size = hashlib.sha256(), 0

    def read(self, size: int = -1) -> bytes:
        pieces, have = [self._left], len(self._left)
        while (size < 0 or have < size) and (chunk := next(self._chunks, b"")):
            pieces.append(chunk)
            have += len(chunk)
        data = b"".join(pieces)
        data, self._left = (data, b"") if size < 0 else (data[:size], data[size:])
        self.digest.update(data)
        self.size += len(data)
        return data


def _s3transfer(job: Job, result: Result) -> None:
    """s3transfer's managed upload of the response, memory bounded as ours is: boto3
    leaves ``max_in_memory_upload_chunks`` at 10 (about 98 MiB held with 8 MiB parts);
    here it holds the parts being uploaded plus the one being read."""
    from sume.core import aws

    settings = WorkerSettings.from_env()
    s3, http = aws.client("s3", patient=True), SafeHttp.for_settings(settings)
    config = _transfer_config(settings.part_size_bytes, max_concurrency=settings.artifact_uploads)
    config.max_in_memory_upload_chunks = settings.artifact_uploads + 1
    with _timed(result, job.traced), http.open(job.url) as response:
        body = _HashedReader(response.iter_bytes())
        s3.upload_fileobj(body, BUCKET, job.key, Config=config)
    result.size, result.sha256 = body.size, body.digest.hexdigest()


def _transfer_config(part_size: int, **options: int) -> Any:
    from boto3.s3.transfer import TransferConfig

    return TransferConfig(multipart_threshold=part_size, multipart_chunksize=part_size, **options)


COPIERS = {"download": _download, "upload": _upload, "ours": _ours, "s3transfer": _s3transfer}


def run_copy(job: Job, env: dict[str, str]) -> Result:
    out = h.python("-m", "bench.artifacts", json.dumps(asdict(job)), env=env, timeout=900)
    return Result(**h.last_json(out, f"copier {job.copier}"))


def memory_bound(settings: Any) -> tuple[int, int]:
    """Ours' parts at most (one per connection and per upload), and its bound in bytes."""
    parts = settings.artifact_connections + settings.artifact_uploads
    return parts, parts * settings.part_size_bytes + settings.artifact_uploads * FRAMING_PER_UPLOAD


@dataclass
class ArtifactsReport:
    size: int
    settings: Any  # the worker's WorkerSettings
    timed: dict[Case, list[Result]] = field(default_factory=dict)  # one per round
    traced: dict[Case, Result] = field(default_factory=dict)

    def size_at(self, speed: str | None) -> int:
        """The slow cap copies a part per connection; the other speeds ``size``."""
        s = self.settings
        return s.artifact_connections * s.part_size_bytes if speed == SLOW else self.size

    def seconds(self, case: Case) -> list[float]:
        return [r.seconds for r in self.timed[case]]

    def limits(self, speed: str) -> list[float]:
        """Round by round, the least time an overlapped copy can take at ``speed``."""
        download, upload = self.seconds(("download", speed)), self.seconds(("upload", None))
        return [max(d, u) for d, u in zip(download, upload, strict=True)]

    def over_limit(self, key: str, speed: str) -> list[float]:
        return h.paired_ratios(self.seconds((key, speed)), self.limits(speed))

    def ranged_speedup(self) -> list[float]:
        """At the slow cap, one stream's time over the ranged copy's, round by round."""
        return h.paired_ratios(self.seconds(("one stream", SLOW)), self.seconds(("ranged", SLOW)))

    def python_peak(self) -> int:
        ours = [r for (key, _), r in self.traced.items() if key in ("one stream", "ranged")]
        return max((r.python_peak or 0 for r in ours), default=0)


def copier_environment() -> dict[str, str]:
    """The worker's Lambda environment, allowing the loopback origin (http, private)."""
    names = {Env.ARTIFACTS_BUCKET_NAME: BUCKET, Env.EVENT_BUS_NAME: "sume-bench-bus"}
    return {**os.environ, **h.STUB_NAMES, **worker_queue_environment(), **h.LOCAL_URLS, **names}


def measure(size: int = SIZE, rounds: int = 3) -> ArtifactsReport:
    """Every case ``rounds`` times, interleaved, then traced once apart (tracing slows a copy)."""
    import boto3

    env = copier_environment()
    report = ArtifactsReport(size, WorkerSettings.from_env(env))
    with contextlib.ExitStack() as servers_up:
        s3_url = servers_up.enter_context(servers.spawned("moto"))
        s3 = boto3.client("s3", endpoint_url=s3_url)
        s3.create_bucket(Bucket=BUCKET)
        # moto's first requests pay its imports and set-up: a multipart upload (past 8 MiB).
        s3.upload_fileobj(io.BytesIO(Content(16 * MiB, SEED + 1).read()), BUCKET, "bench/warm")
        origins: dict[str | None, str] = {}
        digests = {n: Content(n, SEED).sha256() for n in {size, report.size_at(SLOW)}}
        for speed, rate in SPEEDS.items():
            args = ["origin", "--size", str(report.size_at(speed)), "--seed", str(SEED)]
            args += ["--rate", str(rate)] if rate else []
            origins[speed] = servers_up.enter_context(servers.spawned(*args))

        def once(case: Case, traced: bool) -> Result:
            (key, speed), size = case, report.size_at(case[1])
            name = "ours" if key in ("one stream", "ranged") else key
            job = Job(name, origins.get(speed, ""), s3_url, f"bench/{key}", size, traced)
            # Ours as deployed, or held to one stream whatever the origin offers.
            connections = report.settings.artifact_connections if key == "ranged" else 1
            result = run_copy(job, {**env, Env.ARTIFACT_CONNECTIONS: str(connections)})
            stored = None
            if key != "download":
                stored = s3.head_object(Bucket=BUCKET, Key=job.key)["ContentLength"]
                # moto keeps objects (in temporary files); the next case needs the room.
                s3.delete_object(Bucket=BUCKET, Key=job.key)
            if found := problems(size, digests[size], result, stored):
                raise RuntimeError(f"{name} copy is wrong: {'; '.join(found)}")
            return result

        for _ in range(rounds):
            for case in CASES:
                report.timed.setdefault(case, []).append(once(case, traced=False))
        # Downloads hold nothing of Python's; the slow copies hold what the capped ones do.
        for case in CASES:
            if case[0] != "download" and case[1] != SLOW:
                report.traced[case] = once(case, traced=True)
    return report


def problems(size: int, sha256: str, result: Result, stored: int | None) -> list[str]:
    """What is wrong with a copy of ``size`` bytes whose S3 object holds ``stored``."""
    found = [] if result.size == size else [f"moved {result.size} bytes of {size}"]
    if result.sha256 not in (None, sha256):
        found.append("SHA-256 differs from the origin's")
    if stored not in (None, size):
        found.append(f"S3 holds {stored} bytes of {size}")
    return found


def _row(report: ArtifactsReport, case: Case, ratio: list[float] | None) -> tuple[object, ...]:
    timed, traced, rounds = report.timed[case], report.traced.get(case), report.seconds(case)
    seconds = statistics.median(rounds)
    mbs = report.size_at(case[1]) / seconds / 1e6
    x_limit = "" if ratio is None else f"{statistics.median(ratio):.2f}x"
    cpu = statistics.median(r.cpu_seconds for r in timed)
    peak = "" if traced is None else f"{(traced.python_peak or 0) / MiB:.1f}"
    rss = (min(timed, key=lambda r: r.seconds).rss_before, max(r.rss_peak for r in timed))
    label = LABELS[case[0]].format(report.settings.artifact_connections)
    cells = (f"{seconds:.2f}", f"{mbs:.0f}", x_limit, f"{cpu:.2f}", peak)
    return (label, *cells, *(f"{n / MiB:.0f}" for n in rss), f"{min(rounds):.2f}-{max(rounds):.2f}")


def section(ctx: h.Context) -> None:
    rounds = ctx.pick(3, 1)
    report = measure(ctx.artifact_bytes or ctx.pick(SIZE, QUICK_SIZE), rounds)
    print(
        f"## 6. Artifact copies ({report.size / MiB:.0f} MiB, {report.size_at(SLOW) / MiB:.0f} "
        f"MiB at 2 MB/s, from a loopback origin into S3 on moto's server; each run a fresh "
        f"process, median of {rounds} rounds). BOUNDED BY MOTO on the upload side\n"
    )
    rows: list[tuple[object, ...]] = []
    for speed in SPEEDS:
        rows.append((f"**{speed}**", *[""] * 8))
        floors = ("download", speed) in report.timed
        for key in ("download", "upload", "limit", "one stream", "ranged", "s3transfer"):
            case = (key, None if key == "upload" else speed)
            # Under a cap the limit is one connection's: a ranged copy has none.
            judged = key in ("one stream", "s3transfer") or (key == "ranged" and speed == FULL)
            if key == "limit" and floors:
                limit = statistics.median(report.limits(speed))
                mbs = f"{report.size / limit / 1e6:.0f}"
                rows.append(("limit: max(download, upload)", f"{limit:.2f}", mbs, *[""] * 6))
            elif case in report.timed and (floors or key != "upload"):
                ratio = report.over_limit(key, speed) if judged and floors else None
                rows.append(_row(report, case, ratio))
    headers = ["transfer", "s", "MB/s", "x limit", "CPU s", "Python peak MiB", "RSS at start MiB"]
    print(h.table([*headers, "peak RSS MiB", "rounds' range s"], rows))
    s = report.settings
    seconds, planned = s.total_timeout_seconds, s.artifact_planned_bytes_per_second
    deployed = report.timed[("ranged", FULL)]
    cpu_per_gb = statistics.median(r.cpu_seconds for r in deployed) / report.size * 1e9
    share = WORKER_MEMORY_MB / cost.FULL_VCPU_MB
    largest = ", ".join(
        f"{report.size / statistics.median(report.seconds((k, sp))) * seconds / 1e9:.1f} GB "
        f"({k}, {sp})"
        for k in ("one stream", "ranged")
        for sp in (FULL, CAPPED)
    )
    print(
        f"\nPeak RSS: the copy's own high-water mark (VmHWM, reset before the copy); Python "
        f"peak: tracemalloc, in a run of its own. Timeout math (`infra/spec.py`): one "
        f"artifact's copy may take {seconds:.0f} s of the worker's {WORKER_TIMEOUT} s; at "
        f"ours' rates that is {largest}. The worker plans at {planned / 1e6:.0f} MB/s "
        f"({planned * seconds / 1e9:.1f} GB per invocation; `MAX_ARTIFACT_BYTES` "
        f"{s.max_artifact_bytes / 2**30:.0f} GiB). Ours as deployed costs {cpu_per_gb:.1f} CPU s "
        f"per GB, so the worker's {WORKER_MEMORY_MB} MB ({share:.2f} of a vCPU) carries about "
        f"{share / cpu_per_gb * 1e3:.0f} MB/s. At 25 MB/s the ranged copy's 4 connections "
        f"carry about what moto's upload carries here; its gain is judged at 2 MB/s.\n"
    )
    full, speedup = report.over_limit("ranged", FULL), report.ranged_speedup()
    target = f"artifact copy at full speed: ours <= {FULL_SPEED_TARGET}x the overlapped limit"
    ctx.targets.add(target, h.spread(full), statistics.median(full) <= FULL_SPEED_TARGET)
    target = f"artifact copy {SLOW}: ranged >= {RANGED_TARGET}x one stream"
    ctx.targets.add(target, h.spread(speedup), statistics.median(speedup) >= RANGED_TARGET)
    peak, (parts, bound) = report.python_peak(), memory_bound(s)
    target = f"artifact copy memory: ours' Python peak <= {bound / MiB:.0f} MiB ({parts} parts"
    target += f" and {FRAMING_PER_UPLOAD // MiB} MiB per upload)"
    ctx.targets.add(target, f"{peak / MiB:.1f} MiB", peak <= bound)


if __name__ == "__main__":
    job = Job(**json.loads(sys.argv[1]))
    h.use_fake_aws()
    h.forbid_network()
    os.environ["AWS_ENDPOINT_URL"] = job.s3_endpoint
    measured = Result()
    COPIERS[job.copier](job, measured)
    print(json.dumps(asdict(measured)))
