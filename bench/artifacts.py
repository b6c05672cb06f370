"""Artifact copies: ours against the floors for the same bytes.

A generated object (``bench.origin``) is served on loopback at full
speed and capped per connection, and copied into S3 on moto's server, each in
a process of its own (``bench.servers``). Each run of a case is a
fresh process (``bench.copier``): timed runs give seconds, CPU and
RSS; one more run with tracemalloc on gives Python's peak (tracing slows
allocation-heavy code, so its time is not used). Every copy is checked: the
bytes that arrived, the SHA-256 where the copier computes one, the size S3
stored.

The floors: download only (the worker's ``SafeHttp``, read and discarded)
and upload only (the bytes from memory through s3transfer's managed upload,
the best boto3 offers). A copy that overlaps download and upload can take no
less than the slower of the two, so ``max(download, upload)`` is the limit
ours is measured against.

Ours runs as deployed (ranged, since the origin offers ranges) and held to
one stream; beside it, s3transfer's managed upload of the same stream with the
same memory bound, the alternative ``sume.working.transfer`` was measured against. A
copier is one ``Bench.case`` call in ``measure`` and one entry in
``copier.COPIERS``. Cases run interleaved, ``rounds`` times, and the fastest
round counts: on a shared machine the neighbours only ever add time.
"""

from __future__ import annotations

import contextlib
import enum
import io
import os
from dataclasses import dataclass, field

from bench import copier, cost, servers
from bench.env import STUB_NAMES
from bench.origin import Content
from bench.report import Targets, table
from infra.spec import worker_queue_environment
from sume.core.names import Env

MiB = 1024 * 1024
SIZE = 256 * MiB
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


class Role(enum.Enum):
    DOWNLOAD_FLOOR = "download floor"
    UPLOAD_FLOOR = "upload floor"
    OURS = "ours"
    ALTERNATIVE = "alternative"


@dataclass(frozen=True)
class Speed:
    name: str
    bytes_per_second: float | None
    """Per connection, paced by the origin; None: as fast as it goes."""


FULL = Speed("full speed", None)
CAPPED = Speed(
    f"capped at {CAP_BYTES_PER_SECOND / 1e6:.0f} MB/s per connection", CAP_BYTES_PER_SECOND
)


@dataclass(frozen=True)
class Case:
    label: str
    copier: str
    """A name in ``copier.COPIERS``."""
    role: Role
    speed: Speed | None
    """The origin's speed; None for the upload floor, which reads no origin."""
    connections: int = 1


@dataclass(frozen=True)
class Row:
    case: Case
    timed: list[copier.Result]
    """One per round."""
    traced: copier.Result

    @property
    def best(self) -> copier.Result:
        # Neighbours on a shared machine only ever add time.
        return min(self.timed, key=lambda r: r.seconds)

    @property
    def seconds(self) -> float:
        return self.best.seconds


def mb_per_second(size: int, seconds: float) -> float:
    return size / seconds / 1e6


def overlapped_limit(download_seconds: float, upload_seconds: float) -> float:
    """The least time a copy that overlaps download and upload can take."""
    return max(download_seconds, upload_seconds)


@dataclass
class ArtifactsReport:
    size: int
    part_size: int
    max_bytes: int
    """The worker's ``MAX_ARTIFACT_BYTES``."""
    rounds: int
    connections: int
    """The worker's ``ARTIFACT_CONNECTIONS``: ours as deployed."""
    uploads: int
    """The worker's ``ARTIFACT_UPLOADS``."""
    fetch_seconds: float
    """The worker's ``HTTP_TOTAL_TIMEOUT_SECONDS``: the longest one artifact's copy may take."""
    planned_rate: float
    """The worker's ``ARTIFACT_PLANNED_BYTES_PER_SECOND``."""
    rows: list[Row] = field(default_factory=list)

    @property
    def bound_parts(self) -> int:
        """The most parts one copy holds: a part per connection and per upload."""
        return self.connections + self.uploads

    @property
    def bound_bytes(self) -> int:
        """Ours' memory bound: its parts, and botocore's pieces of the uploads in flight."""
        return self.bound_parts * self.part_size + self.uploads * FRAMING_PER_UPLOAD

    def find(self, role: Role, speed: Speed | None, connections: int = 1) -> Row | None:
        for row in self.rows:
            case = row.case
            if (case.role, case.speed, case.connections) == (role, speed, connections):
                return row
        return None

    def limit(self, speed: Speed) -> float | None:
        download = self.find(Role.DOWNLOAD_FLOOR, speed)
        upload = self.find(Role.UPLOAD_FLOOR, None)
        if download is None or upload is None:
            return None
        return overlapped_limit(download.seconds, upload.seconds)

    def over_limit(self, row: Row) -> float | None:
        """Seconds over the limit; None where the limit is one connection's and the row's not."""
        if row.case.speed is None or (row.case.speed.bytes_per_second and row.case.connections > 1):
            return None
        limit = self.limit(row.case.speed)
        return row.seconds / limit if limit else None

    def ranged_speedup(self, speed: Speed) -> float | None:
        """Best ranged copy over the one-stream copy at ``speed``; None until one exists."""
        single = self.find(Role.OURS, speed)
        ranged = [
            r
            for r in self.rows
            if (r.case.role, r.case.speed) == (Role.OURS, speed) and r.case.connections > 1
        ]
        if single is None or not ranged:
            return None
        return single.seconds / min(r.seconds for r in ranged)

    def python_peak(self, role: Role = Role.OURS) -> int:
        return max((r.traced.python_peak or 0 for r in self.rows if r.case.role is role), default=0)


def copier_environment(s3_bucket: str) -> dict[str, str]:
    """The worker's Lambda environment, allowing the loopback origin (http, private)."""
    return {
        **os.environ,
        **STUB_NAMES,
        **worker_queue_environment(),
        Env.ARTIFACTS_BUCKET_NAME: s3_bucket,
        Env.EVENT_BUS_NAME: "sume-bench-bus",
        Env.ALLOW_HTTP_URLS: "true",
        Env.ALLOW_PRIVATE_HOSTS: "true",
    }


class Bench:
    """Cases against one moto server and one origin per speed; every copy is checked."""

    def __init__(self, stack: contextlib.ExitStack, size: int) -> None:
        import boto3

        from sume.working.settings import WorkerSettings

        self._stack = stack
        self._cases: list[Case] = []
        self._origins: dict[Speed, str] = {}
        self._env = copier_environment(BUCKET)
        self._s3_url = stack.enter_context(servers.spawned("moto"))
        self._s3 = boto3.client("s3", endpoint_url=self._s3_url)
        self._s3.create_bucket(Bucket=BUCKET)
        self._sha256 = Content(size, SEED).sha256()
        self._size = size
        self.settings = WorkerSettings.from_env(self._env)

    def case(
        self, label: str, name: str, role: Role, speed: Speed | None = None, connections: int = 1
    ) -> None:
        """Add a row: copier ``name`` (see ``copier.COPIERS``) from an origin at ``speed``."""
        self._cases.append(Case(label, name, role, speed, connections))

    def run(self, rounds: int) -> ArtifactsReport:
        """Each case timed ``rounds`` times, interleaved, then once traced."""
        self._warm_up()
        timed: dict[Case, list[copier.Result]] = {case: [] for case in self._cases}
        for _ in range(rounds):
            for case in self._cases:
                timed[case].append(self._once(case, traced=False))
        settings = self.settings
        report = ArtifactsReport(
            self._size,
            settings.part_size_bytes,
            settings.max_artifact_bytes,
            rounds,
            settings.artifact_connections,
            settings.artifact_uploads,
            settings.total_timeout_seconds,
            settings.artifact_planned_bytes_per_second,
        )
        for case in self._cases:
            report.rows.append(Row(case, timed[case], self._once(case, traced=True)))
        return report

    def _warm_up(self) -> None:
        """One multipart upload first: moto's first requests pay its imports and set-up."""
        from boto3.s3.transfer import TransferConfig

        part = self.settings.part_size_bytes
        body = io.BytesIO(Content(2 * part, SEED + 1).read())
        config = TransferConfig(multipart_threshold=part, multipart_chunksize=part)
        self._s3.upload_fileobj(body, BUCKET, "bench/warm-up", Config=config)
        self._s3.delete_object(Bucket=BUCKET, Key="bench/warm-up")

    def _origin(self, speed: Speed | None) -> str:
        if speed is None:
            return ""
        if speed not in self._origins:
            args = ["origin", "--size", str(self._size), "--seed", str(SEED)]
            if speed.bytes_per_second:
                args += ["--rate", str(speed.bytes_per_second)]
            self._origins[speed] = self._stack.enter_context(servers.spawned(*args))
        return self._origins[speed]

    def _once(self, case: Case, traced: bool) -> copier.Result:
        job = copier.Job(
            copier=case.copier,
            url=self._origin(case.speed),
            s3_endpoint=self._s3_url,
            bucket=BUCKET,
            key=f"bench/{case.copier}-{case.connections}",
            size=self._size,
            seed=SEED,
            part_size=self.settings.part_size_bytes,
            traced=traced,
            connections=case.connections,
        )
        result = copier.run(job, self._env)
        self._check(job, case.role, result)
        return result

    def _check(self, job: copier.Job, role: Role, result: copier.Result) -> None:
        stored = None
        if role is not Role.DOWNLOAD_FLOOR:
            stored = self._s3.head_object(Bucket=job.bucket, Key=job.key)["ContentLength"]
            # moto keeps objects (in temporary files); the next case needs the room.
            self._s3.delete_object(Bucket=job.bucket, Key=job.key)
        if found := problems(job.size, self._sha256, result, stored):
            raise RuntimeError(f"{job.copier} copy is wrong: {'; '.join(found)}")


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


def measure(size: int = SIZE, rounds: int = 2) -> ArtifactsReport:
    with contextlib.ExitStack() as stack:
        bench = Bench(stack, size)
        deployed = bench.settings.artifact_connections
        bench.case("upload only (floor): s3transfer upload_fileobj", "upload", Role.UPLOAD_FLOOR)
        for speed in (FULL, CAPPED):
            bench.case(
                "download only (floor): SafeHttp, one connection",
                "download",
                Role.DOWNLOAD_FLOOR,
                speed,
            )
            bench.case("ours: ArtifactStore.copy held to one stream", "ours", Role.OURS, speed)
            bench.case(
                f"ours: ArtifactStore.copy as deployed, ranged on {deployed} connections",
                "ours",
                Role.OURS,
                speed,
                deployed,
            )
        bench.case(
            "s3transfer upload_fileobj of the stream, ours' memory bound",
            "s3transfer",
            Role.ALTERNATIVE,
            FULL,
        )
        return bench.run(rounds)


def _row(
    report: ArtifactsReport, label: str, seconds: float, row: Row | None
) -> tuple[object, ...]:
    copies = (Role.OURS, Role.ALTERNATIVE)
    ratio = report.over_limit(row) if row and row.case.role in copies else None
    best = row.best if row else None
    python_peak = row.traced.python_peak if row else None
    return (
        label,
        f"{seconds:.2f}",
        f"{mb_per_second(report.size, seconds):.0f}",
        "" if ratio is None else f"{ratio:.2f}x",
        "" if best is None else f"{best.cpu_seconds:.2f}",
        "" if python_peak is None else f"{python_peak / MiB:.1f}",
        "" if best is None else f"{best.rss_before / MiB:.0f}",
        "" if best is None else f"{best.rss_peak / MiB:.0f}",
    )


def render(report: ArtifactsReport, targets: Targets) -> None:
    part_mib = report.part_size / MiB
    print(
        f"## 6. Artifact copies ({report.size / MiB:.0f} MiB from a loopback origin into S3 on "
        f"moto's server; each run a fresh process, fastest of {report.rounds}). "
        "BOUNDED BY MOTO on the upload side\n"
    )
    upload = report.find(Role.UPLOAD_FLOOR, None)
    rows: list[tuple[object, ...]] = []
    for speed in (FULL, CAPPED):
        download = report.find(Role.DOWNLOAD_FLOOR, speed)
        limit = report.limit(speed)
        if download is None or upload is None or limit is None:
            continue
        rows.append((f"**{speed.name}**", "", "", "", "", "", "", ""))
        rows.append(_row(report, download.case.label, download.seconds, download))
        rows.append(_row(report, upload.case.label, upload.seconds, upload))
        rows.append(_row(report, "limit: max(download, upload)", limit, None))
        for row in report.rows:
            copies = (Role.OURS, Role.ALTERNATIVE)
            if row.case.role in copies and row.case.speed == speed:
                rows.append(_row(report, row.case.label, row.seconds, row))
    print(
        table(
            [
                "transfer",
                "s",
                "MB/s",
                "x limit",
                "CPU s",
                "Python peak MiB",
                "RSS at start MiB",
                "peak RSS MiB",
            ],
            rows,
        )
    )
    print(
        "\nAn overlapped copy cannot beat the slower of download only and upload only for the "
        "same bytes, so that is its limit. Upload only is s3transfer's managed upload (up to 10 "
        "threads) from memory; the receiving end is moto, one Python process, which bounds "
        "every copy at full speed here. Python peak: tracemalloc, in a run of its own. Peak "
        "RSS: the copy's own high-water mark (VmHWM, reset just before the copy). Parts are "
        f"the worker's {part_mib:.0f} MiB. Under the cap the limit is one connection's, so a "
        "ranged copy has no x limit there: its measure is the speed-up over one stream."
    )
    from infra.spec import WORKER_MEMORY_MB, WORKER_TIMEOUT

    ours = [r for r in report.rows if r.case.role is Role.OURS]
    if ours:
        seconds = report.fetch_seconds
        largest = ", ".join(
            f"{report.size / r.seconds * seconds / 1e9:.1f} GB ({r.case.label.split(': ')[-1]}, "
            f"{r.case.speed.name if r.case.speed else ''})"
            for r in ours
        )
        planned = report.planned_rate * seconds
        deployed = report.find(Role.OURS, FULL, report.connections) or ours[0]
        cpu = deployed.best.cpu_seconds / report.size * 1e9
        share = WORKER_MEMORY_MB / cost.FULL_VCPU_MB
        print(
            f"\nTimeout math (`infra/spec.py`): one artifact's copy may take {seconds:.0f} s "
            f"(`HTTP_TOTAL_TIMEOUT_SECONDS`) of the worker's {WORKER_TIMEOUT} s; at ours' rates "
            f"above that is {largest}. The worker plans at "
            f"{report.planned_rate / 1e6:.0f} MB/s (`ARTIFACT_PLANNED_BYTES_PER_SECOND`): "
            f"{planned / 1e9:.1f} GB per invocation, and `MAX_ARTIFACT_BYTES` is "
            f"{report.max_bytes / 1e9:.2f} GB ({report.max_bytes / 2**30:.0f} GiB). Ours as "
            f"deployed costs {cpu:.1f} CPU s per GB at full speed here, so the worker's "
            f"{WORKER_MEMORY_MB} MB ({share:.2f} of a vCPU) carries about "
            f"{share / cpu * 1e3:.0f} MB/s."
        )
    print()
    full = report.find(Role.OURS, FULL, report.connections)
    ratio = report.over_limit(full) if full else None
    targets.add(
        f"artifact copy at full speed: ours <= {FULL_SPEED_TARGET}x the overlapped limit",
        "not measured" if ratio is None else f"{ratio:.2f}x",
        None if ratio is None else ratio <= FULL_SPEED_TARGET,
    )
    speedup = report.ranged_speedup(CAPPED)
    targets.add(
        f"artifact copy {CAPPED.name}: ranged >= {RANGED_TARGET}x one stream",
        "not measured" if speedup is None else f"{speedup:.2f}x",
        None if speedup is None else speedup >= RANGED_TARGET,
    )
    peak = report.python_peak()
    targets.add(
        f"artifact copy memory: ours' Python peak <= {report.bound_bytes / MiB:.0f} MiB "
        f"({report.bound_parts} parts, ARTIFACT_CONNECTIONS + ARTIFACT_UPLOADS, and "
        f"{FRAMING_PER_UPLOAD // MiB} MiB per upload)",
        f"{peak / MiB:.1f} MiB ({peak / report.part_size:.1f} parts)",
        peak <= report.bound_bytes,
    )
