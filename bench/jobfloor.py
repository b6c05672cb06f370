"""The floor design of each job path: the fewest calls and writes a correct design makes.

Correct means what ours promises (docs/design.md): nothing acknowledged before
it is durable, the follow-up work exactly once however often SQS delivers, one
ending per announcement sequence, a job that stops mid-copy resumes, a job
whose webhook never comes is found by a poll or given up and announced lost.
Each call is written down with the reason no correct design can skip it; what
ours does beyond them is the gap the report prices. The floor keeps the
services of the design (API Gateway, SQS between receiver and worker,
EventBridge for announcements, S3 for copies): a cheaper architecture is a
different question (docs/bench.md says which).

Each SQS hand-off costs, besides its ``SendMessage``, the event source's
receive and delete (``bench.jobpaths.ESM_BATCH``), and a Lambda request.
"""

from __future__ import annotations

from dataclasses import dataclass

from bench import jobpaths


@dataclass(frozen=True)
class Step:
    function: str
    """``receiver``, ``worker``, ``poller`` (Lambda), or ``registration`` / ``ops CLI``."""
    call: str
    why: str


def receive(large: bool = False) -> list[Step]:
    steps = [Step("receiver", "s3.PutObject", "the event, too large for an item")] if large else []
    return [
        *steps,
        Step(
            "receiver",
            "dynamodb.PutItem",
            "the job, durable before the 200 and idempotent on job_id (one conditional write)",
        ),
        Step("receiver", "sqs.SendMessage", "hands the job to the worker"),
    ]


def work(artifacts: int, large: bool = False) -> list[Step]:
    steps = [
        Step(
            "worker",
            "dynamodb.UpdateItem",
            "the claim: a lease, so one worker works the job however often SQS delivers it",
        )
    ]
    if large:
        steps.append(Step("worker", "s3.GetObject", "the event kept in S3"))
    for n in range(artifacts):
        steps.append(Step("worker", "s3.PutObject", "the artifact's copy"))
        if n < artifacts - 1:
            steps.append(
                Step(
                    "worker",
                    "dynamodb.UpdateItem",
                    "progress between copies: an invocation may not fit every artifact, and a "
                    "retry must not start over",
                )
            )
    return [
        *steps,
        Step(
            "worker",
            "dynamodb.UpdateItem",
            "the ending settled before it is announced: a retry may meet other origins or a "
            "spent budget, and must announce the same ending under the same sequence",
        ),
        Step("worker", "events.PutEvents", "the announcement"),
        Step("worker", "dynamodb.UpdateItem", "finished: nothing owed, out of the due index"),
    ]


REGISTER = [Step("registration", "dynamodb.UpdateItem", "the job to watch, with its status URL")]
FOUND_BY_POLL = [
    Step(
        "poller",
        "dynamodb.UpdateItem",
        "the ending the status answer gave, recorded while the job still awaits (conditional)",
    ),
    Step("poller", "sqs.SendMessage", "hands the job to the worker"),
]
LOST = [
    Step("poller", "dynamodb.UpdateItem", "given up: lost, its announcement owed (conditional)"),
    Step("poller", "events.PutEvents", "announced lost, by the run that gave it up"),
    Step("poller", "dynamodb.UpdateItem", "the announcement sent: nothing owed"),
]
DUPLICATE = [
    Step(
        "receiver",
        "dynamodb.UpdateItem",
        "one write that counts the delivery and, by the values it returns, tells it is a duplicate",
    )
]
REPLAY = [
    Step("ops CLI", "dynamodb.UpdateItem", "the work owed again (conditional)"),
    Step("ops CLI", "sqs.SendMessage", "hands the job to the worker"),
]

FLOORS: dict[str, list[Step]] = dict(
    zip(
        jobpaths.PATHS,
        (
            receive() + work(0),
            receive() + work(2),
            REGISTER + receive() + work(2),
            REGISTER + FOUND_BY_POLL + work(2),
            REGISTER + LOST,
            DUPLICATE,
            REPLAY + work(2),
            receive(large=True) + work(2, large=True),
        ),
        strict=True,
    )
)


def table_writes(steps: list[Step]) -> int:
    return sum(1 for s in steps if s.call.startswith("dynamodb."))


def hand_offs(steps: list[Step]) -> int:
    return sum(1 for s in steps if s.call == "sqs.SendMessage")
