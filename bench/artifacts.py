"""Section 6, artifact copies: ours against the floors for the same bytes.

A generated object (``devstack.origin``) is served on loopback at full speed and capped
per connection (as CDNs cap each), and copied into S3 on moto's server, each in a
process of its own (``devstack.servers``). Each run of a case is a fresh process
(``bench.copier``) giving seconds, CPU and RSS; one more run with tracemalloc on gives
Python's peak (tracing slows allocation-heavy code, so its time is not used). Every
copy is checked: the bytes that arrived, the SHA-256 where the copier computes one,
the size S3 stored.

The floors: download only (the worker's ``SafeHttp``, read and discarded) and upload
only (the bytes from memory through s3transfer's managed upload, the best boto3
offers). A copy that overlaps download and upload takes no less than the slower of
the two, so ``max(download, upload)`` is ours' limit. Ours runs as deployed (ranged,
since the origin offers ranges) and held to one stream; beside it, s3transfer's
managed upload of the same stream with the same memory bound, the alternative
``sume.working.transfer`` was measured against. Cases run interleaved, round after
round; a ratio is the median of the rounds' ratios, shown with their range.
"""

from __future__ import annotations

import contextlib
import io
import os
import statistics
from dataclasses import dataclass, field
from typing import Any

from bench import copier, cost
from bench import harness as h
from devstack import servers
from devstack.origin import Content
from infra.spec import WORKER_MEMORY_MB, WORKER_TIMEOUT, worker_queue_environment
from sume.core.names import Env

MiB = h.MiB
SIZE = 128 * MiB
QUICK_SIZE = 32 * MiB
CAP_BYTES_PER_SECOND = 25_000_000
SEED = 1
BUCKET = "sume-bench-artifacts"
FULL_SPEED_TARGET = 1.2
"""Ours at full speed: at most this many times the overlapped limit."""
RANGED_TARGET = 3.0
"""Under the per-connection cap: ranged at least this many times faster than one stream."""
FRAMING_PER_UPLOAD = 2 * MiB
"""Ours' memory bound beyond its parts, per upload in flight: botocore reads an upload's
body in 1 MiB pieces (checksum, signature, framing) and holds a piece and its framed
copy at once; what the sender reads of them comes on top (16 KiB at a time over a
socket: 2.0 MiB measured, one 5 MiB part sent alone under tracemalloc)."""
FULL, CAPPED = "full speed", f"capped at {CAP_BYTES_PER_SECOND / 1e6:.0f} MB/s per connection"
SPEEDS = {FULL: None, CAPPED: CAP_BYTES_PER_SECOND}


@dataclass(frozen=True)
class Case:
    key: str
    """``download``, ``upload``, ``one stream``, ``ranged``, ``s3transfer``."""
    label: str
    copier: str
    """A name in ``copier.COPIERS``."""
    speed: str | None
    """The origin's speed (``SPEEDS``); None for the upload floor, which reads no origin."""
    connections: int = 1


@dataclass
class Row:
    case: Case
    timed: list[copier.Result]
    """One per round."""
    traced: copier.Result | None = None

    @property
    def rounds(self) -> list[float]:
        return [r.seconds for r in self.timed]

    @property
    def seconds(self) -> float:
        return statistics.median(self.rounds)


@dataclass
class ArtifactsReport:
    size: int
    rounds: int
    settings: Any
    """The worker's ``WorkerSettings``: part size, connections, uploads, timeouts."""
    rows: dict[tuple[str, str | None], Row] = field(default_factory=dict)

    @property
    def bound_parts(self) -> int:
        """The most parts one copy holds: a part per connection and per upload."""
        return int(self.settings.artifact_connections + self.settings.artifact_uploads)

    @property
    def bound_bytes(self) -> int:
        """Ours' memory bound: its parts, and botocore's pieces of the uploads in flight."""
        parts = self.bound_parts * self.settings.part_size_bytes
        return int(parts + self.settings.artifact_uploads * FRAMING_PER_UPLOAD)

    def limits(self, speed: str) -> list[float]:
        """Round by round, the least time an overlapped copy can take at ``speed``."""
        download, upload = self.rows[("download", speed)], self.rows[("upload", None)]
        return [max(d, u) for d, u in zip(download.rounds, upload.rounds, strict=True)]

    def over_limit(self, key: str, speed: str) -> list[float]:
        return h.paired_ratios(self.rows[(key, speed)].rounds, self.limits(speed))

    def ranged_speedup(self, speed: str = CAPPED) -> list[float]:
        """One stream's time over the ranged copy's, round by round."""
        return h.paired_ratios(
            self.rows[("one stream", speed)].rounds, self.rows[("ranged", speed)].rounds
        )

    def python_peak(self) -> int:
        ours = [r for (key, _), r in self.rows.items() if key in ("one stream", "ranged")]
        return max((r.traced.python_peak or 0 for r in ours if r.traced), default=0)


def copier_environment() -> dict[str, str]:
    """The worker's Lambda environment, allowing the loopback origin (http, private)."""
    return {
        **os.environ,
        **h.STUB_NAMES,
        **worker_queue_environment(),
        **h.LOCAL_URLS,
        Env.ARTIFACTS_BUCKET_NAME: BUCKET,
        Env.EVENT_BUS_NAME: "sume-bench-bus",
    }


def cases(connections: int) -> list[Case]:
    found = [Case("upload", "upload only (floor): s3transfer upload_fileobj", "upload", None)]
    for speed in SPEEDS:
        found += [
            Case("download", "download only (floor): SafeHttp, one connection", "download", speed),
            Case("one stream", "ours: ArtifactStore.copy held to one stream", "ours", speed),
            Case(
                "ranged",
                f"ours: ArtifactStore.copy as deployed, ranged on {connections} connections",
                "ours",
                speed,
                connections,
            ),
        ]
    label = "s3transfer upload_fileobj of the stream, ours' memory bound"
    return [*found, Case("s3transfer", label, "s3transfer", FULL)]


def measure(size: int = SIZE, rounds: int = 3) -> ArtifactsReport:
    """Each case timed ``rounds`` times, interleaved, then once traced; every copy checked."""
    import boto3
    from boto3.s3.transfer import TransferConfig

    from sume.working.settings import WorkerSettings

    env = copier_environment()
    settings = WorkerSettings.from_env(env)
    part, sha256 = settings.part_size_bytes, Content(size, SEED).sha256()
    report = ArtifactsReport(size, rounds, settings)
    with contextlib.ExitStack() as servers_up:
        s3_url = servers_up.enter_context(servers.spawned("moto"))
        s3 = boto3.client("s3", endpoint_url=s3_url)
        s3.create_bucket(Bucket=BUCKET)
        # One multipart upload first: moto's first requests pay its imports and set-up.
        config = TransferConfig(multipart_threshold=part, multipart_chunksize=part)
        warm = io.BytesIO(Content(2 * part, SEED + 1).read())
        s3.upload_fileobj(warm, BUCKET, "bench/warm-up", Config=config)
        origins = {}
        for speed, rate in SPEEDS.items():
            args = ["origin", "--size", str(size), "--seed", str(SEED)]
            args += ["--rate", str(rate)] if rate else []
            origins[speed] = servers_up.enter_context(servers.spawned(*args))

        def once(case: Case, traced: bool) -> copier.Result:
            key = f"bench/{case.copier}-{case.connections}"
            job = copier.Job(
                case.copier, origins.get(case.speed or "", ""), s3_url, BUCKET, key, size,
                SEED, part, traced, case.connections,
            )  # fmt: skip
            result = copier.run(job, env)
            stored = None
            if case.key != "download":
                stored = s3.head_object(Bucket=BUCKET, Key=key)["ContentLength"]
                # moto keeps objects (in temporary files); the next case needs the room.
                s3.delete_object(Bucket=BUCKET, Key=key)
            if found := problems(size, sha256, result, stored):
                raise RuntimeError(f"{case.copier} copy is wrong: {'; '.join(found)}")
            return result

        chosen = cases(settings.artifact_connections)
        for case in chosen:
            report.rows[(case.key, case.speed)] = Row(case, [])
        for _ in range(rounds):
            for case in chosen:
                report.rows[(case.key, case.speed)].timed.append(once(case, traced=False))
        for case in chosen:
            if case.key != "download":  # reads and drops: nothing of Python's to trace
                report.rows[(case.key, case.speed)].traced = once(case, traced=True)
    return report


def problems(size: int, sha256: str, result: copier.Result, stored: int | None) -> list[str]:
    """What is wrong with a copy of ``size`` bytes whose S3 object holds ``stored``."""
    found = []
    if result.size != size:
        found.append(f"moved {result.size} bytes of {size}")
    if result.sha256 is not None and result.sha256 != sha256:
        found.append("SHA-256 differs from the origin's")
    if stored is not None and stored != size:
        found.append(f"S3 holds {stored} bytes of {size}")
    return found


def section(ctx: h.Context) -> ArtifactsReport:
    size = ctx.artifact_bytes or ctx.pick(SIZE, QUICK_SIZE)
    report = measure(size, ctx.pick(3, 1))
    print(
        f"## 6. Artifact copies ({size / MiB:.0f} MiB from a loopback origin into S3 on "
        f"moto's server; each run a fresh process, median of {report.rounds} rounds). "
        "BOUNDED BY MOTO on the upload side\n"
    )
    rows: list[tuple[object, ...]] = []
    for speed in SPEEDS:
        rows.append((f"**{speed}**", *[""] * 8))
        limit = statistics.median(report.limits(speed))
        for key in ("download", "upload", "limit", "one stream", "ranged", "s3transfer"):
            if key == "limit":
                mbs = f"{size / limit / 1e6:.0f}"
                rows.append(("limit: max(download, upload)", f"{limit:.2f}", mbs, *[""] * 6))
                continue
            row = report.rows.get((key, None if key == "upload" else speed))
            if row is None:
                continue
            # Under the cap the limit is one connection's: a ranged copy has none.
            judged = key in ("one stream", "s3transfer") or (key == "ranged" and speed == FULL)
            ratio = statistics.median(report.over_limit(key, speed)) if judged else None
            best, traced = min(row.timed, key=lambda r: r.seconds), row.traced
            rows.append(
                (
                    row.case.label,
                    f"{row.seconds:.2f}",
                    f"{size / row.seconds / 1e6:.0f}",
                    "" if ratio is None else f"{ratio:.2f}x",
                    f"{statistics.median(r.cpu_seconds for r in row.timed):.2f}",
                    "" if traced is None else f"{(traced.python_peak or 0) / MiB:.1f}",
                    f"{best.rss_before / MiB:.0f}",
                    f"{max(r.rss_peak for r in row.timed) / MiB:.0f}",
                    f"{min(row.rounds):.2f}-{max(row.rounds):.2f}",
                )
            )
    headers = ["transfer", "s", "MB/s", "x limit", "CPU s", "Python peak MiB", "RSS at start MiB"]
    print(h.table([*headers, "peak RSS MiB", "rounds' range s"], rows))
    s = report.settings
    seconds, planned = s.total_timeout_seconds, s.artifact_planned_bytes_per_second
    deployed = report.rows[("ranged", FULL)]
    cpu_per_gb = statistics.median(r.cpu_seconds for r in deployed.timed) / size * 1e9
    share = WORKER_MEMORY_MB / cost.FULL_VCPU_MB
    largest = ", ".join(
        f"{size / report.rows[(k, sp)].seconds * seconds / 1e9:.1f} GB ({k}, {sp})"
        for k in ("one stream", "ranged")
        for sp in SPEEDS
    )
    print(
        f"\nPeak RSS: the copy's own high-water mark (VmHWM, reset before the copy); Python "
        f"peak: tracemalloc, in a run of its own. Timeout math (`infra/spec.py`): one "
        f"artifact's copy may take {seconds:.0f} s of the worker's {WORKER_TIMEOUT} s; at "
        f"ours' rates that is {largest}. The worker plans at {planned / 1e6:.0f} MB/s "
        f"({planned * seconds / 1e9:.1f} GB per invocation; `MAX_ARTIFACT_BYTES` "
        f"{s.max_artifact_bytes / 2**30:.0f} GiB). Ours as deployed costs {cpu_per_gb:.1f} CPU s "
        f"per GB, so the worker's {WORKER_MEMORY_MB} MB ({share:.2f} of a vCPU) carries about "
        f"{share / cpu_per_gb * 1e3:.0f} MB/s.\n"
    )
    full = report.over_limit("ranged", FULL)
    ctx.targets.add(
        f"artifact copy at full speed: ours <= {FULL_SPEED_TARGET}x the overlapped limit",
        h.spread(full),
        statistics.median(full) <= FULL_SPEED_TARGET,
    )
    speedup = report.ranged_speedup()
    ctx.targets.add(
        f"artifact copy {CAPPED}: ranged >= {RANGED_TARGET}x one stream",
        h.spread(speedup),
        statistics.median(speedup) >= RANGED_TARGET,
    )
    peak = report.python_peak()
    ctx.targets.add(
        f"artifact copy memory: ours' Python peak <= {report.bound_bytes / MiB:.0f} MiB "
        f"({report.bound_parts} parts and {FRAMING_PER_UPLOAD // MiB} MiB per upload)",
        f"{peak / MiB:.1f} MiB",
        peak <= report.bound_bytes,
    )
    return report
