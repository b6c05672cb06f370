"""One scenario that touches every delivery path, and the invariants it must keep.

``drive`` plays Sume against a receiver (any URL). ``settle`` and ``check``
then look inside a ``DevStack`` and say whether every job was processed
exactly once, every artifact stored, nothing lost and nothing in the DLQ.
Shared by ``make demo``, ``tests/e2e`` and ``python -m devstack.simulator scenario``.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from devstack.simulator import Delivery, Sume, SumeJob

if TYPE_CHECKING:
    from devstack.stack import DevStack
    from sume.store.job import Job

Expect = Callable[[str, str], None]

WEBHOOK, POLL, REJECTED, PING = "webhook", "poll", "rejected", "ping"


@dataclass
class Case:
    name: str
    job: SumeJob | None
    arrives: str
    """webhook | poll | rejected | ping: how the stack should learn of it."""
    deliveries: list[Delivery] = field(default_factory=list)

    @property
    def reached(self) -> int:
        return sum(d.reached for d in self.deliveries)

    @property
    def timed_out(self) -> int:
        """Attempts sent but unanswered in time: they may have been handled."""
        return sum(d.timed_out for d in self.deliveries)

    def results(self) -> list[str]:
        return [r for d in self.deliveries for r in d.results()]

    def sume_problems(self) -> Iterator[str]:
        """What Sume itself saw that the receiver should not have answered."""
        results = self.results()
        if self.arrives == WEBHOOK and not all(d.delivered for d in self.deliveries):
            yield f"{self.name}: a delivery was never acknowledged ({results})"
        news = results.count("new")
        if self.arrives == WEBHOOK and (news > 1 or (news == 0 and not self.timed_out)):
            yield f"{self.name}: answered 'new' {news} times ({results})"
        if self.arrives == POLL and self.reached:
            yield f"{self.name}: a delivery reached the receiver, but none should"
        if self.arrives == REJECTED and set(results) != {"signature_mismatch"}:
            yield f"{self.name}: a forged delivery was not refused ({results})"
        if self.arrives == PING and results != ["test"]:
            yield f"{self.name}: webhook.test answered {results}"


@dataclass
class Run:
    cases: list[Case]
    skipped: list[str] = field(default_factory=list)

    def jobs(self) -> list[Case]:
        """Cases whose job must end processed."""
        return [c for c in self.cases if c.arrives in (WEBHOOK, POLL)]

    def sume_problems(self) -> list[str]:
        return [p for c in self.cases for p in c.sume_problems()]

    def as_expected(self) -> bool:
        return not self.sume_problems()


def once(sume: Sume, **faults: Any) -> Callable[[SumeJob], list[Delivery]]:
    """One delivery of a job (with Sume's retries), with optional faults."""
    return lambda job: [sume.deliver(job, **faults)]


def drive(
    sume: Sume,
    expect: Expect | None,
    redeliver_after: Callable[[SumeJob], None],
    slow_seconds: float = 0.5,
) -> Run:
    """Play every path at once, then Redeliver one job once it has been processed.

    ``expect`` registers a job for status polling, as the application that
    submitted it would; without it the job whose webhooks never arrive is
    skipped (nothing could ever find it).
    """
    plain = sume.new_job("job.completed", artifacts=3)
    rotated = [f"whsec_next_{secrets.token_hex(8)}", *sume.secrets]
    plays: list[tuple[Case, Callable[[SumeJob], list[Delivery]]]] = [
        (Case("completed with artifacts, then Redeliver", plain, WEBHOOK), once(sume)),
        (Case("failed", sume.new_job("job.failed"), WEBHOOK), once(sume)),
        (Case("canceled", sume.new_job("job.canceled"), WEBHOOK), once(sume)),
        (
            Case("first answer lost, retried", sume.new_job(artifacts=1), WEBHOOK),
            once(sume, drop_first_response=True),
        ),
        (
            Case("4 concurrent twin deliveries", sume.new_job(artifacts=2), WEBHOOK),
            lambda job: sume.deliver_concurrently(job, 4),
        ),
        (
            Case("signed during a secret rotation", sume.new_job(artifacts=1), WEBHOOK),
            once(sume, signing_secrets=rotated),
        ),
        (
            Case(
                "slow artifact server",
                sume.new_job(artifacts=2, slow_seconds=slow_seconds),
                WEBHOOK,
            ),
            once(sume),
        ),
        (
            Case(
                "artifact link fails once, worker retries",
                sume.new_job(artifacts=1, flaky=1),
                WEBHOOK,
            ),
            once(sume),
        ),
        (
            Case("forged signature", sume.new_job(), REJECTED),
            once(sume, signing_secrets=["forged"], attempts=1),
        ),
    ]
    skipped = []
    lost = sume.new_job(artifacts=1)
    if expect is not None:
        expect(lost.job_id, lost.status_url)
        plays.append(
            (
                Case("webhook never arrives (status_url poll)", lost, POLL),
                once(sume, unreachable=True),
            )
        )
    else:
        skipped.append("webhook never arrives: needs the jobs table to register the job")
    ping = Case("webhook.test ping", None, PING)
    cases = [case for case, _ in plays] + [ping]

    def play(entry: tuple[Case, Callable[[SumeJob], list[Delivery]]]) -> None:
        case, how = entry
        assert case.job is not None
        case.deliveries.extend(how(case.job))

    with ThreadPoolExecutor(len(plays) + 1) as pool:
        pinged = pool.submit(sume.ping)
        list(pool.map(play, plays))
        ping.deliveries.append(pinged.result())
    redeliver_after(plain)
    cases[0].deliveries.append(sume.redeliver(plain))
    return Run(cases, skipped)


def delivery_lines(run: Run) -> Iterator[str]:
    """What Sume saw, one line per case."""
    for case in run.cases:
        job = case.job.job_id if case.job else "-"
        answers = ", ".join(case.results()) or "no answer"
        yield f"{case.name:<42} {job:<22} {case.reached:>2} reached: {answers}"
    for note in run.skipped:
        yield f"skipped: {note}"


# Inside the local stack


def settle(stack: DevStack, run: Run, timeout: float) -> bool:
    """Wait until every job was announced and no work is queued or in flight."""
    assert stack.names is not None
    wanted = {c.job.job_id for c in run.jobs() if c.job}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (
            wanted <= set(stack.announced())
            and stack.queue_depth(stack.names.queue_url) == 0
            and stack.queue_depth(stack.journal_queue_url) == 0
        ):
            return True
        time.sleep(0.2)
    return False


@dataclass
class JobReport:
    case: Case
    state: str | None
    source: str | None
    outcome: str | None
    deliveries_counted: int
    announcements: int
    artifacts_stored: int


@dataclass
class Report:
    jobs: list[JobReport]
    deliveries: int
    duplicates: int
    rejected: int
    dlq: int
    problems: list[str]

    @property
    def processed_once(self) -> int:
        return sum(j.announcements == 1 and j.state == "processed" for j in self.jobs)

    @property
    def recovered_by_poll(self) -> int:
        return sum(j.source == "poll" and j.state == "processed" for j in self.jobs)

    @property
    def lost(self) -> int:
        return sum(j.state != "processed" for j in self.jobs)

    @property
    def ok(self) -> bool:
        return not self.problems

    def summary(self) -> dict[str, int]:
        return {
            "jobs": len(self.jobs),
            "deliveries": self.deliveries,
            "duplicates": self.duplicates,
            "rejected": self.rejected,
            "processed once": self.processed_once,
            "recovered by poll": self.recovered_by_poll,
            "lost": self.lost,
            "DLQ": self.dlq,
        }

    def lines(self) -> Iterator[str]:
        yield (
            f"{'job':<42} {'outcome':<10} {'source':<8} {'delivered':>9} "
            f"{'announced':>9} {'artifacts':>9}"
        )
        for j in self.jobs:
            job = j.case.job
            expected = len(job.artifacts) if job else 0
            yield (
                f"{j.case.name:<42} {j.outcome or '-':<10} {j.source or '-':<8} "
                f"{j.deliveries_counted:>9} {j.announcements:>9} "
                f"{f'{j.artifacts_stored}/{expected}':>9}"
            )
        yield ""
        summary = self.summary()
        yield "  ".join(f"{k:>{max(len(k), 4)}}" for k in summary)
        yield "  ".join(f"{v:>{max(len(k), 4)}}" for k, v in summary.items())


def _stored_digests(stack: DevStack) -> dict[str, set[str]]:
    """SHA-256 of every object in the artifacts bucket, by key."""
    assert stack.names is not None
    s3 = stack.client("s3")
    out: dict[str, set[str]] = {}
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=stack.names.artifacts_bucket):
        for obj in page.get("Contents", []):
            data = s3.get_object(Bucket=stack.names.artifacts_bucket, Key=obj["Key"])["Body"].read()
            out.setdefault(hashlib.sha256(data).hexdigest(), set()).add(obj["Key"])
    return out


def _job_report(
    case: Case, stored: Job | None, announcements: int, digests: dict[str, set[str]]
) -> tuple[JobReport, list[str]]:
    job = case.job
    assert job is not None
    problems = []
    copied = 0
    for name, digest in job.digests().items():
        if any(job.job_id in key for key in digests.get(digest, ())):
            copied += 1
        else:
            problems.append(f"{case.name}: artifact {name} is not in the artifacts bucket")
    report = JobReport(
        case,
        stored.state if stored else None,
        stored.source if stored else None,
        stored.outcome if stored else None,
        (stored.deliveries or 0) if stored else 0,
        announcements,
        copied,
    )
    if report.state != "processed":
        problems.append(f"{case.name}: job {job.job_id} is {report.state or 'missing'}")
    if report.announcements != 1:
        problems.append(f"{case.name}: announced {report.announcements} times, not once")
    if report.outcome != job.outcome:
        problems.append(f"{case.name}: outcome {report.outcome}, Sume said {job.outcome}")
    if report.source != case.arrives:
        problems.append(f"{case.name}: arrived by {report.source}, expected {case.arrives}")
    if not case.reached <= report.deliveries_counted <= case.reached + case.timed_out:
        problems.append(
            f"{case.name}: {report.deliveries_counted} deliveries counted, "
            f"{case.reached} answered and {case.timed_out} timed out"
        )
    return report, problems


def check(stack: DevStack, run: Run) -> Report:
    """Compare what Sume sent with what the stack holds; every broken invariant is a problem."""
    assert stack.names is not None
    problems = run.sume_problems()
    announced = stack.announced()
    digests = _stored_digests(stack)
    table = stack.jobs()
    jobs = []
    for case in run.jobs():
        assert case.job is not None
        stored = table.get(case.job.job_id)
        report, found = _job_report(case, stored, announced[case.job.job_id], digests)
        jobs.append(report)
        problems.extend(found)
    for case in run.cases:
        if case.arrives == REJECTED and case.job:
            if table.get(case.job.job_id):
                problems.append(f"{case.name}: a forged event was stored")
            if announced[case.job.job_id]:
                problems.append(f"{case.name}: a forged event was announced")
    dlq = stack.queue_depth(stack.names.dlq_url)
    if dlq:
        problems.append(f"{dlq} message(s) in the DLQ: {stack.dlq_messages()}")
    if queued := stack.queue_depth(stack.names.queue_url):
        problems.append(f"{queued} message(s) still in the jobs queue")
    attempts = [a for c in run.cases for d in c.deliveries for a in d.attempts]
    return Report(
        jobs=jobs,
        deliveries=sum(a.reached or a.timed_out for a in attempts),
        # Counted by the stack: an answer Sume never got still counted there.
        duplicates=sum(max(0, j.deliveries_counted - 1) for j in jobs),
        rejected=sum(a.status is not None and 400 <= a.status < 500 for a in attempts),
        dlq=dlq,
        problems=problems,
    )
