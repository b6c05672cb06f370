"""Plays the Lambda event sources of the stack: the SQS event source mapping
(worker) and the EventBridge schedule (poller), plus a tap that reads a queue.

Each runs in its own thread and invokes the handler exactly as Lambda would,
one invocation at a time (a handler module's globals are per container).
"""

from __future__ import annotations

import abc
import contextlib
import json
import threading
import traceback
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

from devstack.lambda_context import LambdaContext
from devstack.resources import queue_arn

Handler = Callable[[dict[str, Any], Any], Any]
REGION = "us-east-1"
# Lambda's SQS pollers wait 20 s; 10 keeps a message's wait the same (moto wakes a long
# poll when a message arrives) and an idle stack's calls few. A stop does not wait
# for a long poll (``Loop.stop``).
LONG_POLL_SECONDS = 10
# How soon a disabled mapping's source sees it enabled again (``resume``).
DISABLED_RECHECK_SECONDS = 1.0


class Loop(abc.ABC):
    """A daemon thread repeating ``step`` until stopped."""

    name = "loop"

    def __init__(self) -> None:
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._working = threading.Lock()

    @contextlib.contextmanager
    def working(self) -> Iterator[bool]:
        """Held while a step works what it took (``stop`` waits for it); True unless
        the loop was halted meanwhile, when the step must work nothing."""
        with self._working:
            yield not self._stop.is_set()

    @abc.abstractmethod
    def step(self) -> None:
        """One unit of the loop's work."""

    def pause(self) -> float:
        """Seconds to wait between steps (long polls wait inside ``step``)."""
        return 0.0

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.step()
            except Exception:  # a local loop must survive a bad step
                if self._stop.is_set():
                    return
                traceback.print_exc()
                self._stop.wait(1.0)
                continue
            self._stop.wait(self.pause())

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()

    def halt(self) -> None:
        """Take no further step; the work under way finishes (``stop`` waits for it)."""
        self._stop.set()

    def stop(self) -> None:
        """Halt, and wait for the work under way: not for a long poll, which would
        hold a stop for its whole wait. The thread ends when its poll returns, and
        works nothing it took (``working``)."""
        self.halt()
        with self._working:
            pass


def _lambda_attributes(message: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for name, attribute in (message.get("MessageAttributes") or {}).items():
        out[name] = {
            "dataType": attribute.get("DataType"),
            "stringValue": attribute.get("StringValue"),
            "binaryValue": attribute.get("BinaryValue"),
            "stringListValues": [],
            "binaryListValues": [],
        }
    return out


def sqs_records(messages: list[dict[str, Any]], queue_arn: str) -> dict[str, Any]:
    """An SQS event as Lambda's event source mapping builds it."""
    return {
        "Records": [
            {
                "messageId": m["MessageId"],
                "receiptHandle": m["ReceiptHandle"],
                "body": m["Body"],
                "attributes": dict(m.get("Attributes") or {}),
                "messageAttributes": _lambda_attributes(m),
                "md5OfBody": m.get("MD5OfBody", ""),
                "eventSource": "aws:sqs",
                "eventSourceARN": queue_arn,
                # The queue's region, as its ARN says (arn:aws:sqs:<region>:...).
                "awsRegion": queue_arn.split(":")[3],
            }
            for m in messages
        ]
    }


BatchObserver = Callable[[list[dict[str, Any]], set[str], BaseException | None], None]
Enabled = Callable[[], bool]


class SqsEventSource(Loop):
    """Long-polls a queue and hands batches to a handler, like Lambda's SQS trigger.

    With ``ReportBatchItemFailures`` the handler's ``batchItemFailures`` stay
    on the queue and the rest are deleted; an exception, or an identifier that
    is not in the batch, fails the whole batch. A failed message becomes
    visible again after ``retry_delay_seconds`` (the stack's visibility
    timeout, shortened locally); the queue's own redrive policy moves it to
    the DLQ after its maximum receives, so this class never redrives.
    ``enabled`` asks the mapping's state (``devstack.switches``): a disabled
    mapping reads nothing, as Lambda's.
    """

    name = "worker"

    def __init__(
        self,
        sqs: Any,
        queue_url: str,
        handler: Handler,
        function_name: str,
        timeout_seconds: float,
        retry_delay_seconds: int,
        batch_size: int = 10,
        wait_seconds: int = LONG_POLL_SECONDS,
        observer: BatchObserver | None = None,
        enabled: Enabled | None = None,
    ) -> None:
        super().__init__()
        self._enabled = enabled
        self._sqs = sqs
        self._url = queue_url
        self._arn = queue_arn(sqs, queue_url)
        self._handler = handler
        self._function = function_name
        self._timeout = timeout_seconds
        self._retry_delay = retry_delay_seconds
        self._batch = batch_size
        self._wait = wait_seconds
        self._observer = observer

    def step(self) -> None:
        self.poll_once()

    def poll_once(self) -> int:
        """Receive one batch and invoke the handler with it; returns its size."""
        if self._enabled is not None and not self._enabled():
            self._stop.wait(DISABLED_RECHECK_SECONDS)
            return 0
        messages = self._sqs.receive_message(
            QueueUrl=self._url,
            MaxNumberOfMessages=self._batch,
            WaitTimeSeconds=self._wait,
            MessageSystemAttributeNames=["All"],
            MessageAttributeNames=["All"],
        ).get("Messages", [])
        if not messages:
            return 0
        with self.working() as go:
            if not go or (self._enabled is not None and not self._enabled()):
                # Halted or disabled while this receive waited: back unworked.
                with contextlib.suppress(Exception):  # moto may be gone (stopped)
                    self._release(messages, 0)
                return 0
            return self._work(messages)

    def _work(self, messages: list[dict[str, Any]]) -> int:
        ids = {m["MessageId"] for m in messages}
        error: BaseException | None = None
        try:
            result = self._handler(
                sqs_records(messages, self._arn), LambdaContext(self._function, self._timeout)
            )
            failures = {
                f.get("itemIdentifier") for f in (result or {}).get("batchItemFailures", [])
            }
            failed = ids if not failures <= ids else {f for f in failures if f}
        except Exception as exc:  # Lambda retries the whole batch
            traceback.print_exc()
            error, failed = exc, ids
        done = [m for m in messages if m["MessageId"] not in failed]
        retry = [m for m in messages if m["MessageId"] in failed]
        if done:
            self._sqs.delete_message_batch(
                QueueUrl=self._url,
                Entries=[
                    {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(done)
                ],
            )
        if retry:
            self._release(retry, self._retry_delay)
        if self._observer:
            self._observer(messages, failed, error)
        return len(messages)

    def _release(self, messages: list[dict[str, Any]], after_seconds: int) -> None:
        self._sqs.change_message_visibility_batch(
            QueueUrl=self._url,
            Entries=[
                {
                    "Id": str(i),
                    "ReceiptHandle": m["ReceiptHandle"],
                    "VisibilityTimeout": after_seconds,
                }
                for i, m in enumerate(messages)
            ],
        )


def scheduled_event(rule_arn: str, region: str = REGION) -> dict[str, Any]:
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": "Scheduled Event",
        "source": "aws.events",
        "account": "123456789012",
        "time": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "region": region,
        "resources": [rule_arn],
        "detail": {},
    }


class Schedule(Loop):
    """Invokes a handler every ``interval_seconds`` with a scheduled event.

    moto 5.2.5 cannot host the stack's schedule rule: once a rule with a
    ScheduleExpression exists, its PutEvents raises NotImplementedError, which
    would break the worker's announcements. So the schedule is a timer here,
    which ``enabled`` turns off as the rule's state would (``devstack.switches``
    keeps that rule, on the default bus, where no announcement goes).
    ``due`` says whether a round would find anything: a timer's tick with
    nothing due is skipped (a tick by hand always runs).
    """

    name = "poller"

    def __init__(
        self,
        handler: Handler,
        interval_seconds: float,
        function_name: str,
        timeout_seconds: float,
        observer: Callable[[Any], None] | None = None,
        region: str = REGION,
        busy: Callable[[], bool] | None = None,
        enabled: Enabled | None = None,
        due: Callable[[], bool] | None = None,
    ) -> None:
        super().__init__()
        self._enabled = enabled
        self._handler = handler
        self._region = region
        self._busy = busy
        self._due = due
        self._interval = interval_seconds
        self._function = function_name
        self._timeout = timeout_seconds
        self._observer = observer
        self._lock = threading.Lock()

    def pause(self) -> float:
        return self._interval

    def step(self) -> None:
        with self.working() as go:
            if go:
                self._tick()

    def _tick(self) -> None:
        # A round costs a run per shard group (claims, queries, frees): ticking every
        # few seconds with nothing due kept an idle stack a third of a core busy. In
        # AWS the tick comes every 5 minutes and nobody pays for an empty round.
        # Asked first: it is the one question an idle stack's ticks ask.
        if self._due is not None and not self._due():
            return
        # In AWS a round's runs (at most the 120 s timeout) end long before the
        # next 5-minute tick; here ticks come every second or so, and a tick over
        # a round still running would only pile up assignments the runs refuse or
        # work late. So the timer waits until the round's assignments are taken;
        # a tick by hand never waits.
        if self._busy is not None and self._busy():
            return
        # A disabled rule does not tick (a tick by hand still runs, as an invoke would).
        if self._enabled is not None and not self._enabled():
            return
        self.run_once()

    def run_once(self) -> Any:
        """One scheduled invocation; also callable by hand (never two at once)."""
        with self._lock:
            rule = f"arn:aws:events:{self._region}:123456789012:rule/{self._function}-schedule"
            result = self._handler(
                scheduled_event(rule, self._region), LambdaContext(self._function, self._timeout)
            )
        if self._observer:
            self._observer(result)
        return result


class QueueTap(Loop):
    """Reads JSON messages from a queue (an EventBridge rule's target) and deletes them."""

    name = "tap"

    def __init__(self, sqs: Any, queue_url: str, on_message: Callable[[dict[str, Any]], None]):
        super().__init__()
        self._sqs = sqs
        self._url = queue_url
        self._on_message = on_message

    def step(self) -> None:
        messages = self._sqs.receive_message(
            QueueUrl=self._url, MaxNumberOfMessages=10, WaitTimeSeconds=LONG_POLL_SECONDS
        ).get("Messages", [])
        with self.working() as go:
            for message in messages if go else []:
                self._on_message(json.loads(message["Body"]))
                self._sqs.delete_message(QueueUrl=self._url, ReceiptHandle=message["ReceiptHandle"])
