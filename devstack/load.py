"""``make load``: signed deliveries at a set rate for a set time against the local stack.

``python -m devstack.load --rate 50 --seconds 30`` starts a local stack on
ephemeral ports and an artifact origin on loopback, then sends Sume's traffic
at ``--rate`` requests a second: new jobs (each with one artifact), Sume's
retries of a delivery already answered, concurrent twins (a new job's delivery
twice at once), Redelivers of older jobs, and a share of forged signatures.
Every delivery is signed afresh, as Sume signs each attempt; a legitimate one
that is not answered 2xx is retried as Sume would (10 attempts, spaced
``RETRY_SPACING_SECONDS`` here instead of Sume's minute).

A progress line a second goes to stderr while it sends. At the end it prints
the requests a second it held, the answer time's p50 and p99, the answers by
status, and the outcome check: one item, one claim, one artifact copy and one
announcement per job, no item for a forged delivery, nothing lost, nothing in
a DLQ. Exit status 1 when the check fails (or the stack did not settle).

The sender runs in a process of its own (``python -m devstack.load send``),
so the stack's handlers and moto's server keep this one's interpreter to
themselves; the local stack is one Python process, which bounds what it holds
(docs/bench.md).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import subprocess
import sys
import threading
import time
import warnings
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, fields
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import urlsplit

from devstack.loopback import LoopbackHTTPServer
from sume.contract import signature
from sume.core.ids import key_segment

# Shares of the requests sent (a twin is one share of two requests at once).
MIX: dict[str, float] = {"new": 0.5, "retry": 0.15, "twin": 0.1, "redeliver": 0.1, "forged": 0.15}
MAX_ATTEMPTS = 10
TIMEOUT_SECONDS = 10.0
# Sume spaces attempts a minute apart; 5 s here (as `make run`'s "Send one" line), so a
# run ends soon, yet retries do not pile onto a stack that is already behind.
RETRY_SPACING_SECONDS = 5.0
# Sume retries a job's delivery shortly after its first; a Redeliver comes later.
RECENT_JOBS = 20
ARTIFACT_BYTES = 1024
SHOWN_PROBLEMS = 20
NO_ANSWER = 0


@dataclass(frozen=True)
class Shot:
    at: float
    """Seconds after the start."""
    kind: str
    job_id: str


def plan(rate: float, seconds: float, seed: int = 37) -> list[Shot]:
    """The requests to send, in time order: ``rate x seconds`` of them, the mix in ``MIX``."""
    pick = random.Random(seed)
    kinds, weights = zip(*MIX.items(), strict=True)
    shots: list[Shot] = []
    jobs: list[str] = []
    prefix = f"load-{seed}-{time.time_ns():x}"
    total = int(rate * seconds)
    index = 0
    while index < total:
        at = index / rate
        kind = pick.choices(kinds, weights)[0]
        if kind in ("retry", "redeliver") and not jobs:
            kind = "new"
        if kind in ("new", "twin"):
            jobs.append(f"{prefix}-{len(jobs)}")
            job = jobs[-1]
        elif kind == "retry":
            job = pick.choice(jobs[-RECENT_JOBS:])
        elif kind == "redeliver":
            job = pick.choice(jobs)
        else:
            job = f"{prefix}-forged-{index}"
        shots.append(Shot(at, kind, job))
        index += 2 if kind == "twin" else 1
    return shots


def body(job_id: str, artifacts_url: str) -> bytes:
    """A completed job's event, with one artifact on the origin."""
    event = {
        "event": "job.completed",
        "job_id": job_id,
        "status": "OK",
        "payload": {"artifacts": [f"{artifacts_url}/a/{job_id}.bin"]},
    }
    return json.dumps(event, separators=(",", ":")).encode()


@dataclass
class Tally:
    """What the sender saw: every answer, and which jobs Sume was told are stored."""

    sent: int = 0
    answers: Counter[int] = field(default_factory=Counter)
    latencies_ms: list[float] = field(default_factory=list)
    accepted: Counter[str] = field(default_factory=Counter)
    """2xx answers per job."""
    jobs: list[str] = field(default_factory=list)
    """Every job sent, in order (whatever its answers)."""
    forged: list[str] = field(default_factory=list)
    gave_up: list[str] = field(default_factory=list)
    """Jobs whose 10 attempts all failed: only a status poll would find them."""
    unexpected: Counter[str] = field(default_factory=Counter)
    """A forged delivery not answered 401, by status."""
    seconds: float = 0.0

    def percentile(self, share: float) -> float:
        ordered = sorted(self.latencies_ms)
        if not ordered:
            return 0.0
        return ordered[min(len(ordered) - 1, int(share * len(ordered)))]

    def progress(self, elapsed: float, planned: float) -> str:
        statuses = " ".join(f"{k or 'none'} {v}" for k, v in sorted(self.answers.items()))
        return (
            f"[load {elapsed:>4.0f}/{planned:g} s] sent {self.sent} "
            f"({self.sent / max(elapsed, 1e-9):.1f}/s), answered {sum(self.answers.values())}: "
            f"{statuses or '-'}; p50 {self.percentile(0.5):.0f} ms"
        )

    def to_json(self) -> str:
        # asdict would rebuild each Counter from (key, value) pairs, counting the pairs.
        return json.dumps({f.name: getattr(self, f.name) for f in fields(self)})

    @classmethod
    def from_json(cls, text: str) -> Tally:
        data = json.loads(text)
        data["answers"] = Counter({int(k): v for k, v in data["answers"].items()})
        data["accepted"] = Counter(data["accepted"])
        data["unexpected"] = Counter(data["unexpected"])
        return cls(**data)


async def post(url: str, raw: bytes, headers: dict[str, str]) -> int:
    """One POST on a connection of its own; the status, or NO_ANSWER within Sume's 10 s."""
    parts = urlsplit(url)
    lines = [
        f"POST {parts.path} HTTP/1.1",
        f"Host: {parts.netloc}",
        "Content-Type: application/json",
        f"Content-Length: {len(raw)}",
        "Connection: close",
        *(f"{k}: {v}" for k, v in headers.items()),
    ]
    try:
        async with asyncio.timeout(TIMEOUT_SECONDS):
            reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
            try:
                writer.write(("\r\n".join(lines) + "\r\n\r\n").encode() + raw)
                await writer.drain()
                status = int((await reader.readline()).split()[1])
                await reader.read()
            finally:
                writer.close()
    except (OSError, TimeoutError, ValueError, IndexError):
        return NO_ANSWER
    return status


async def fire(
    url: str,
    secret: str,
    artifacts_url: str,
    shots: list[Shot],
    seconds: float,
    echo: Callable[[str], None] = lambda _line: None,
) -> Tally:
    """Send ``shots`` on time, Sume's retries after them; the tally once all are answered."""
    tally = Tally()
    loop = asyncio.get_running_loop()
    started = loop.time()

    async def deliver(job_id: str, forged: bool) -> None:
        for attempt in range(1 if forged else MAX_ATTEMPTS):
            raw = body(job_id, artifacts_url)
            headers = signature.headers(
                raw, ["not-the-secret" if forged else secret], int(time.time())
            )
            tally.sent += 1
            sent = loop.time()
            status = await post(url, raw, headers)
            tally.latencies_ms.append((loop.time() - sent) * 1000)
            tally.answers[status] += 1
            if forged:
                if status != 401:
                    tally.unexpected[str(status)] += 1
                return
            if 200 <= status < 300:
                tally.accepted[job_id] += 1
                return
            if attempt < MAX_ATTEMPTS - 1:
                await asyncio.sleep(RETRY_SPACING_SECONDS)
        tally.gave_up.append(job_id)

    async def progress() -> None:
        while True:
            await asyncio.sleep(1)
            echo(tally.progress(loop.time() - started, seconds))

    reporter = asyncio.create_task(progress())
    tasks = []
    for shot in shots:
        await asyncio.sleep(max(0.0, started + shot.at - loop.time()))
        if shot.kind == "forged":
            tally.forged.append(shot.job_id)
        elif shot.kind in ("new", "twin"):
            tally.jobs.append(shot.job_id)
        copies = 2 if shot.kind == "twin" else 1
        for _ in range(copies):
            tasks.append(asyncio.create_task(deliver(shot.job_id, shot.kind == "forged")))
    await asyncio.gather(*tasks)
    reporter.cancel()
    tally.seconds = loop.time() - started
    return tally


def send(
    url: str,
    secret: str,
    artifacts_url: str,
    rate: float,
    seconds: float,
    echo: Callable[[str], None] = lambda _line: None,
) -> Tally:
    """Send ``rate`` requests a second for ``seconds`` (in this process)."""
    shots = plan(rate, seconds)
    return asyncio.run(fire(url, secret, artifacts_url, shots, seconds, echo))


class Origin:
    """Where the jobs' artifacts are served from, counting each download."""

    def __init__(self) -> None:
        self.downloads: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._server = LoopbackHTTPServer(_OriginHandler, self)

    @property
    def url(self) -> str:
        return self._server.url()

    def served(self, job_id: str) -> int:
        with self._lock:
            return self.downloads[job_id]

    def count(self, job_id: str) -> None:
        with self._lock:
            self.downloads[job_id] += 1

    def __enter__(self) -> Origin:
        self._server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.stop()


class _OriginHandler(BaseHTTPRequestHandler):
    server: LoopbackHTTPServer

    def do_GET(self) -> None:
        name = self.path.rsplit("/", 1)[-1]
        self.server.owner.count(name.removesuffix(".bin"))
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(ARTIFACT_BYTES))
        self.end_headers()
        self.wfile.write(name.encode()[:ARTIFACT_BYTES].ljust(ARTIFACT_BYTES, b"."))

    def log_message(self, *args: Any) -> None:
        pass


def settle(stack: Any, tally: Tally, idle_seconds: float) -> bool:
    """Wait until every job Sume was told is stored has been announced, as long as one
    more is announced every ``idle_seconds``: the worker may trail the receiver far."""
    done, last = -1, time.monotonic()
    while time.monotonic() - last < idle_seconds:
        announced = stack.announced()
        now_done = sum(1 for job in tally.accepted if announced[job])
        if now_done == len(tally.accepted):
            return True
        if now_done > done:
            done, last = now_done, time.monotonic()
        time.sleep(0.2)
    return False


def check(stack: Any, origin: Origin, tally: Tally) -> list[str]:
    """The outcome: what must hold for every job sent; each problem in one line."""
    problems: list[str] = []
    jobs = stack.jobs()
    announced = stack.announced()
    objects = _artifact_objects(stack)
    for job_id in tally.jobs:
        stored = jobs.get(job_id)
        if job_id in tally.gave_up and stored is None:
            problems.append(f"{job_id}: Sume gave up after {MAX_ATTEMPTS} attempts")
            continue
        if stored is None:
            problems.append(f"{job_id}: acknowledged but no item (lost)")
            continue
        if stored.state != "processed":
            problems.append(f"{job_id}: {stored.state}, not processed")
        if stored.attempts != 1:
            problems.append(f"{job_id}: claimed {stored.attempts} times, not once")
        if (stored.deliveries or 0) < tally.accepted[job_id]:
            problems.append(
                f"{job_id}: {stored.deliveries} deliveries counted, "
                f"{tally.accepted[job_id]} acknowledged"
            )
        copies = objects[key_segment(job_id)]
        if copies != 1 or origin.served(job_id) != 1:
            problems.append(
                f"{job_id}: {copies} artifact object(s), downloaded {origin.served(job_id)} "
                "time(s), not one copy"
            )
        if announced[job_id] != 1:
            problems.append(f"{job_id}: announced {announced[job_id]} times, not once")
    for job_id in tally.forged:
        if jobs.get(job_id) is not None:
            problems.append(f"{job_id}: a forged delivery was stored")
    for status, times in tally.unexpected.items():
        problems.append(f"forged deliveries answered {status} (not 401) {times} times")
    # The load's own jobs: a stack shared with other work may hold others' messages.
    sent = {*tally.jobs, *tally.forged}
    problems.extend(f"{job}: in the DLQ" for job in stack.dlq_messages() if job in sent)
    return problems


def _artifact_objects(stack: Any) -> Counter[str]:
    """Objects in the artifacts bucket per job key segment (``jobs/<job>/...``)."""
    s3 = stack.client("s3")
    found: Counter[str] = Counter()
    pages = s3.get_paginator("list_objects_v2").paginate(
        Bucket=stack.names.artifacts_bucket, Prefix="jobs/"
    )
    for page in pages:
        for item in page.get("Contents", []):
            found[item["Key"].split("/")[1]] += 1
    return found


def summary(tally: Tally) -> Iterator[str]:
    held = tally.sent / tally.seconds if tally.seconds else 0.0
    statuses = ", ".join(f"{k or 'no answer'}: {v}" for k, v in sorted(tally.answers.items()))
    yield (
        f"sent {tally.sent} requests in {tally.seconds:.1f} s: {held:.1f} requests/s held; "
        f"answer time p50 {tally.percentile(0.5):.0f} ms, p99 {tally.percentile(0.99):.0f} ms"
    )
    yield f"answers: {statuses}"
    yield (
        f"jobs: {len(tally.jobs)} sent, {len(tally.accepted)} acknowledged, "
        f"{len(tally.gave_up)} given up by Sume; forged: {len(tally.forged)}"
    )


def _send_command(argv: list[str]) -> int:
    """``python -m devstack.load send URL SECRET ARTIFACTS RATE SECONDS``: the tally on stdout."""
    url, secret, artifacts_url, rate, seconds = argv
    tally = send(
        url,
        secret,
        artifacts_url,
        float(rate),
        float(seconds),
        echo=lambda line: print(line, file=sys.stderr, flush=True),
    )
    print(tally.to_json())
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["send"]:
        return _send_command(argv[1:])
    parser = argparse.ArgumentParser(prog="python -m devstack.load", description=__doc__)
    parser.add_argument("--rate", type=float, default=20.0, help="requests a second")
    parser.add_argument("--seconds", type=float, default=30.0, help="how long to send")
    parser.add_argument(
        "--settle", type=float, default=60.0, help="give up after this long without progress (s)"
    )
    args = parser.parse_args(argv)
    if args.rate <= 0 or args.seconds <= 0:
        parser.error("--rate and --seconds must be positive")

    from devstack.settings import DevStackSettings
    from devstack.stack import DevStack

    # The local stack has no CloudWatch to send metrics to: Powertools says so once.
    warnings.filterwarnings("ignore", "No application metrics to publish")

    stack = DevStack(DevStackSettings(port=0, moto_port=0, prefix="sume-load"))
    stack.start()
    try:
        with Origin() as origin:
            print(f"local stack up: {stack.url}; {args.rate:g} requests/s for {args.seconds:g} s")
            started = time.monotonic()
            sender = subprocess.run(  # noqa: S603 - this interpreter running this module
                [
                    sys.executable,
                    "-m",
                    "devstack.load",
                    "send",
                    stack.url,
                    stack.signing_secret,
                    origin.url,
                    str(args.rate),
                    str(args.seconds),
                ],
                stdout=subprocess.PIPE,
                text=True,
                check=True,
            )
            tally = Tally.from_json(sender.stdout)
            settled = settle(stack, tally, args.settle)
            drained = time.monotonic() - started
            problems = check(stack, origin, tally)
    finally:
        stack.stop()
    for line in summary(tally):
        print(line)
    print(
        f"worker: {len(tally.accepted)} jobs processed {drained:.1f} s after the sender "
        f"started: {len(tally.accepted) / drained:.1f} jobs/s"
        + ("" if settled else " (not all: see below)")
    )
    if not settled:
        print(f"FAILED: no job announced for {args.settle:g} s, some still owed", file=sys.stderr)
    for problem in problems[:SHOWN_PROBLEMS]:
        print(f"FAILED: {problem}", file=sys.stderr)
    if len(problems) > SHOWN_PROBLEMS:
        print(f"FAILED: ... and {len(problems) - SHOWN_PROBLEMS} more", file=sys.stderr)
    if settled and not problems:
        print(
            "OK: one item, one claim, one artifact copy and one announcement per job; "
            "no forged delivery stored; nothing lost, nothing in the DLQ"
        )
        return 0
    return 1


if __name__ == "__main__":
    raise SystemExit(main())
