"""The functions' log lines into the local stack's CloudWatch Logs, as Lambda ships them.

Each function logs to its own log group on moto (``/aws/lambda/<prefix>-receiver``,
``-worker``, ``-poller``) its job events (at INFO, as deployed) and its warnings and
errors, so what reads a stage's logs (``sume-webhooks tail``, ``aws logs tail``) reads
the local stack's the same way. Its other INFO lines stay out: they are mostly the
poller's rounds. The console shows only what ``POWERTOOLS_LOG_LEVEL`` asks (errors
by default).

The three functions share one process and one Powertools logger here: a line goes
to the log group of the invocation running on its thread (set by ``invoking``),
else to the one its own ``function_name`` names.
"""

from __future__ import annotations

import contextlib
import json
import logging
import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from sume.core.names import JOB_EVENT

# Lambda names a container's stream by day, version and container; one container here.
STREAM = "local"
# A batch goes out this often, or sooner once this many lines wait (AWS takes 10,000).
FLUSH_SECONDS = 0.2
MAX_BATCH = 1000

_invocation = threading.local()


@contextlib.contextmanager
def invoking(log_group: str) -> Iterator[None]:
    """Lines logged on this thread meanwhile belong to ``log_group``."""
    before = getattr(_invocation, "log_group", None)
    _invocation.log_group = log_group
    try:
        yield
    finally:
        _invocation.log_group = before


class LogShipper(logging.Handler):
    """Formats each record as the console does and puts it in its log group, in batches."""

    def __init__(self, logs: Any, groups: dict[str, str], formatter: logging.Formatter) -> None:
        """``groups`` maps each function's name to its log group."""
        super().__init__(logging.INFO)
        self.setFormatter(formatter)
        self._logs = logs
        self._groups = groups
        self._known = set(groups.values())
        self._pending: queue.SimpleQueue[tuple[str, int, str] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="log-shipper", daemon=True)
        for group in self._known:
            for call, kw in (
                (logs.create_log_group, {}),
                (logs.create_log_stream, {"logStreamName": STREAM}),
            ):
                with contextlib.suppress(logs.exceptions.ResourceAlreadyExistsException):
                    call(logGroupName=group, **kw)
        self._thread.start()

    def emit(self, record: logging.LogRecord) -> None:
        # The poller's rounds say a dozen INFO lines every tick: kept all day in
        # moto's memory, they would grow it by hundreds of MB and slow every read.
        if record.levelno < logging.WARNING and getattr(record, JOB_EVENT, None) is None:
            return
        try:
            line = self.format(record)
            group = getattr(_invocation, "log_group", None) or self._named_in(line)
            if group in self._known:
                self._pending.put((group, int(record.created * 1000), line))
        except Exception:  # logging must never break the function
            self.handleError(record)

    def _named_in(self, line: str) -> str | None:
        try:
            return self._groups.get(str(json.loads(line).get("function_name")))
        except (ValueError, AttributeError):
            return None

    def close(self) -> None:
        """Ship what is left, then stop."""
        if self._thread.is_alive():
            self._pending.put(None)
            self._thread.join()
        super().close()

    def _run(self) -> None:
        stopping = False
        while not stopping:
            batch: list[tuple[str, int, str]] = []
            deadline = time.monotonic() + FLUSH_SECONDS
            while len(batch) < MAX_BATCH and not stopping:
                try:
                    item = self._pending.get(timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    break
                if item is None:
                    stopping = True
                else:
                    batch.append(item)
            self._ship(batch)

    def _ship(self, batch: Iterable[tuple[str, int, str]]) -> None:
        by_group: dict[str, list[dict[str, Any]]] = {}
        for group, at, line in batch:
            by_group.setdefault(group, []).append({"timestamp": at, "message": line})
        for group, events in by_group.items():
            # A batch must be in time order; threads may have logged out of it.
            events.sort(key=lambda event: event["timestamp"])
            # moto gone or refusing them: these lines go nowhere, as on a console
            # that closed; the function is not told.
            with contextlib.suppress(ClientError, BotoCoreError):
                self._logs.put_log_events(
                    logGroupName=group, logStreamName=STREAM, logEvents=events
                )


def ship(
    logs: Any, groups: dict[str, str], logger: logging.Logger, console_level: str
) -> Callable[[], None]:
    """Ship the functions' job events, warnings and errors into ``groups`` (function name
    to log group) while their console (``logger``'s first handler) shows
    ``console_level`` and above; returns what undoes it, after a last flush."""
    console = logger.handlers[0]
    levels = (logger.level, console.level)
    shown = logging.getLevelName(console_level.upper())
    shown = shown if isinstance(shown, int) else logging.ERROR
    console.setLevel(shown)
    logger.setLevel(min(shown, logging.INFO))
    shipper = LogShipper(logs, groups, console.formatter or logging.Formatter())
    logger.addHandler(shipper)

    def stop() -> None:
        logger.removeHandler(shipper)
        shipper.close()
        logger.setLevel(levels[0])
        console.setLevel(levels[1])

    return stop
