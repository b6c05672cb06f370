"""One artifact transfer, measured in a fresh process: ``python -m bench.copier JOB``.

A fresh process per case, so the peak RSS is that case's own. The parent
(``bench.artifacts``) passes the job as JSON and reads the result as
the last line of stdout. What runs before the clock starts (imports, clients,
the upload floor's bytes) is not timed and not traced; RSS is read just
before the copy and as its peak during the copy (see ``peak_rss``).

Each transfer is a ``Copier``: given the job, it prepares what it needs and
returns the timed action, which answers the bytes moved and, when it hashed
them, their SHA-256. Adding a copier (a pipelined or ranged one) is adding an
entry to ``COPIERS``.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import io
import json
import os
import resource
import sys
import time
import tracemalloc
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass

from bench.harness import forbid_network, use_fake_aws


@dataclass(frozen=True)
class Job:
    copier: str
    url: str
    """The origin's URL (unused by the upload floor)."""
    s3_endpoint: str
    """moto's server, where every S3 call goes."""
    bucket: str
    key: str
    size: int
    seed: int
    part_size: int
    traced: bool
    """Trace Python allocations (tracemalloc) during the copy."""
    connections: int = 1
    """Ours: ``ARTIFACT_CONNECTIONS`` (1: one stream, whatever the origin offers)."""


@dataclass(frozen=True)
class Result:
    seconds: float
    cpu_seconds: float
    size: int
    sha256: str | None
    python_peak: int | None
    """Peak bytes allocated by Python during the copy (tracemalloc), when traced."""
    rss_before: int
    """Resident bytes just before the copy."""
    rss_peak: int
    """Peak resident bytes during the copy (Linux; elsewhere the process's peak)."""


Action = Callable[[], tuple[int, str | None]]
Copier = Callable[[Job], Action]


def _download_only(job: Job) -> Action:
    """The download floor: the same ``SafeHttp`` the worker uses, read and discarded."""
    from sume.net.fetch import SafeHttp
    from sume.working.settings import WorkerSettings

    settings = WorkerSettings.from_env()
    http = SafeHttp(
        settings.url_policy, settings.connect_timeout_seconds, settings.read_timeout_seconds
    )

    def run() -> tuple[int, str | None]:
        seen = 0
        with http.open(job.url) as response:
            for chunk in response.iter_bytes():
                seen += len(chunk)
        return seen, None

    return run


def _upload_only(job: Job) -> Action:
    """The upload floor: the bytes from memory through s3transfer's managed upload."""
    from boto3.s3.transfer import TransferConfig

    from devstack.origin import Content
    from sume.core import aws

    s3 = aws.client("s3", patient=True)
    data = Content(job.size, job.seed).read()
    config = TransferConfig(multipart_threshold=job.part_size, multipart_chunksize=job.part_size)

    def run() -> tuple[int, str | None]:
        s3.upload_fileobj(io.BytesIO(data), job.bucket, job.key, Config=config)
        return len(data), None

    return run


def _ours(job: Job) -> Action:
    """The worker's ``ArtifactStore``, wired as the worker wires it."""
    from sume.core.names import Env
    from sume.working.compose import build_artifact_store
    from sume.working.settings import WorkerSettings

    os.environ[Env.ARTIFACT_CONNECTIONS] = str(job.connections)

    # Built as the worker builds it, so the bench copies with exactly the
    # deployed wiring (client config, part size, size cap, policy).
    store = build_artifact_store(WorkerSettings.from_env())

    def run() -> tuple[int, str | None]:
        stored = store.copy(job.url, job.key)
        return stored.size, stored.sha256

    return run


class _HashedReader:
    """A response as the non-seekable file s3transfer reads, hashed on the way."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._chunks = chunks
        self._left = b""
        self.digest = hashlib.sha256()
        self.size = 0

    def read(self, size: int = -1) -> bytes:
        pieces = [self._left]
        have = len(self._left)
        for chunk in self._chunks:
            pieces.append(chunk)
            have += len(chunk)
            if 0 <= size <= have:
                break
        data = b"".join(pieces)
        data, self._left = (data, b"") if size < 0 else (data[:size], data[size:])
        self.digest.update(data)
        self.size += len(data)
        return data


def _s3transfer(job: Job) -> Action:
    """s3transfer's managed upload of the response, memory bounded as ours is.

    boto3's ``TransferConfig`` leaves s3transfer's ``max_in_memory_upload_chunks``
    at 10 (about 98 MiB held with 8 MiB parts); here it gets ours' bound, the
    parts being uploaded plus the one being read.
    """
    from boto3.s3.transfer import TransferConfig

    from sume.core import aws
    from sume.net.fetch import SafeHttp
    from sume.working.settings import WorkerSettings

    settings = WorkerSettings.from_env()
    s3 = aws.client("s3", patient=True)
    http = SafeHttp(
        settings.url_policy, settings.connect_timeout_seconds, settings.read_timeout_seconds
    )
    uploads = settings.artifact_uploads
    config = TransferConfig(
        multipart_threshold=job.part_size,
        multipart_chunksize=job.part_size,
        max_concurrency=uploads,
    )
    config.max_in_memory_upload_chunks = uploads + 1

    def run() -> tuple[int, str | None]:
        with http.open(job.url) as response:
            body = _HashedReader(response.iter_bytes())
            s3.upload_fileobj(body, job.bucket, job.key, Config=config)
        return body.size, body.digest.hexdigest()

    return run


COPIERS: dict[str, Copier] = {
    "download": _download_only,
    "upload": _upload_only,
    "ours": _ours,
    "s3transfer": _s3transfer,
}


def _status_kib(field: str) -> int | None:
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def rss_now() -> int:
    kib = _status_kib("VmRSS")
    return peak_rss() if kib is None else kib * 1024


def peak_rss() -> int:
    """Peak resident bytes since ``reset_peak_rss``, or of the whole process.

    Linux: ``VmHWM``, not ``ru_maxrss``. A child started by exec inherits in
    ``ru_maxrss`` the parent's peak at the moment of the fork, so a small copier
    launched by a large bench would report the bench's memory.
    """
    kib = _status_kib("VmHWM")
    if kib is not None:
        return kib * 1024
    # Kilobytes on other Unixes, bytes on macOS.
    scale = 1 if sys.platform == "darwin" else 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale


def reset_peak_rss() -> None:
    # Linux: "5" resets the resident high-water mark (VmHWM), so the peak is
    # the copy's and not the imports'.
    with contextlib.suppress(OSError), open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")


def measure(job: Job) -> Result:
    action = COPIERS[job.copier](job)
    gc.collect()
    before = rss_now()
    reset_peak_rss()
    if job.traced:
        tracemalloc.start()
    wall, cpu = time.perf_counter(), time.process_time()
    size, sha256 = action()
    seconds, cpu_seconds = time.perf_counter() - wall, time.process_time() - cpu
    python_peak = None
    if job.traced:
        python_peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return Result(seconds, cpu_seconds, size, sha256, python_peak, before, peak_rss())


def run(job: Job, env: dict[str, str]) -> Result:
    """Measure ``job`` in a fresh interpreter with ``env`` as its environment."""
    from bench.harness import last_json, python

    out = python("-m", "bench.copier", json.dumps(asdict(job)), env=env, timeout=900)
    return Result(**last_json(out, f"copier {job.copier}"))


def main(argv: list[str]) -> None:
    job = Job(**json.loads(argv[0]))
    use_fake_aws()
    forbid_network()
    os.environ["AWS_ENDPOINT_URL"] = job.s3_endpoint
    result = measure(job)
    print(json.dumps(asdict(result)))


if __name__ == "__main__":
    main(sys.argv[1:])
