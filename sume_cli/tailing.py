"""A deployment's job events as its functions logged them: one line each, in time order.

Every job event (``sume.core.names.Happened``) is one log line of the receiver,
the worker or the poller, marked with ``job_event``. ``Follower`` reads those
lines from the functions' log groups with FilterLogEvents, on a stage as on the
local stack (whose functions log to moto as Lambda ships them): nothing is
subscribed, so nothing is left behind whenever it stops.

CloudWatch Logs may take a while to make a line searchable, and a line can be
older than one already shown. Each read therefore goes back ``LAG_SECONDS``
before the time it is made, and the lines' event ids keep any from being shown
twice. The layout of a line (``line``) is the local stack's journal's too.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from sume.core.names import JOB_EVENT, Happened
from sume_cli.times import iso

# How far back each read goes, for lines CloudWatch Logs made searchable late.
LAG_SECONDS = 60
# Pages one read of one log group may take; the rest waits for the next read.
MAX_PAGES = 10
# Longer lines are none of the functions' job events (those are a few hundred bytes).
MAX_LINE_BYTES = 64 * 1024
# Only lines that carry the key. moto ignores a JSON pattern (it matches every
# line), so the definitive test is ``parse``, on the stage as on the local stack.
FILTER_PATTERN = f'{{ $.{JOB_EVENT} = "*" }}'
MAX_SHOWN = 120
KINDS = frozenset(Happened)
# What Powertools adds to every line: not the event's own fields.
_BOILERPLATE = frozenset(
    {
        "level",
        "location",
        "message",
        "timestamp",
        "service",
        "cold_start",
        "function_name",
        "function_memory_size",
        "function_arn",
        "function_request_id",
        "correlation_id",
        "xray_trace_id",
        "sampling_rate",
        JOB_EVENT,
    }
)


# The widest kind, processing_error, and a typical job id: the columns line up.
KIND_WIDTH = 16
JOB_ID_WIDTH = 24


def line(at: float, kind: str, job_id: str | None, detail: str) -> str:
    """One job event for people: local time, what happened, the job, the rest."""
    clock = time.strftime("%H:%M:%S", time.localtime(at))
    return f"{clock} {kind:<{KIND_WIDTH}} {job_id or '-':<{JOB_ID_WIDTH}} {detail}"


@dataclass(frozen=True)
class JobEventLine:
    """One job event, as one function's log line told it."""

    at: float
    """When it was logged (epoch seconds)."""
    kind: str
    job_id: str | None
    detail: str
    fields: Mapping[str, Any]
    """The line's own keys (Powertools' common ones aside)."""

    def text(self) -> str:
        return line(self.at, self.kind, self.job_id, self.detail)

    def as_json(self) -> dict[str, Any]:
        return {
            "at": iso(self.at),
            "event": self.kind,
            "job_id": self.job_id,
            "detail": self.detail,
            "fields": dict(self.fields),
        }


def _short(value: Any) -> str:
    text = str(value)
    return text if len(text) <= MAX_SHOWN else text[: MAX_SHOWN - 1] + "…"


def _again(fields: Mapping[str, Any]) -> str:
    sequence = fields.get("sequence")
    return f" (announcement #{sequence})" if isinstance(sequence, int) and sequence > 1 else ""


def _error(fields: Mapping[str, Any]) -> str:
    error = fields.get("error")
    if isinstance(error, Mapping):
        return f"{error.get('code')}: {_short(error.get('message', ''))}"
    return _short(error)


def _processed(fields: Mapping[str, Any]) -> str:
    artifacts = fields.get("artifacts")
    stored = f", {artifacts} artifact(s) stored" if artifacts else ""
    return f"{fields.get('outcome')}{stored}{_again(fields)}"


def _processing_error(fields: Mapping[str, Any]) -> str:
    replay = "replay: " if fields.get("replay") else ""
    said = f"{replay}{fields.get('code')} (Sume said {fields.get('outcome')})"
    return said + _again(fields)


def _lost(fields: Mapping[str, Any]) -> str:
    error = fields.get("last_poll_error")
    last = f", last poll error {error}" if error else ""
    return f"no answer after {fields.get('polls')} poll(s){last}"


# What each job event's line says besides its kind and job: state, code, Sume's answer.
DETAILS: dict[str, Callable[[Mapping[str, Any]], str]] = {
    Happened.RECEIVED: lambda f: (
        f"{f.get('sume_event')}: stored{', work queued' if f.get('enqueued') else ''}"
    ),
    Happened.DUPLICATE: lambda f: (
        f"{f.get('sume_event')}: delivery counted; the job is {f.get('stored_state')}"
    ),
    Happened.REJECTED: lambda f: f"{f.get('status')} {f.get('reason')}",
    Happened.RETRY: lambda f: f"{_error(f)}; receive {f.get('receives')}, SQS retries it",
    Happened.SWEEPER: lambda f: (
        f"{f.get('reason')}; last receive: acknowledged, left to the sweeper"
    ),
    Happened.DLQ: lambda f: f"{_error(f)}; receive {f.get('receives')}: parked, to the DLQ",
    Happened.PROCESSED: _processed,
    Happened.REPLAYED: _processed,
    Happened.PROCESSING_ERROR: _processing_error,
    Happened.RECOVERED: lambda f: f"by status_url poll: {f.get('sume_event')}, stored",
    Happened.LOST: _lost,
    Happened.REGISTERED: lambda f: f"for status polls, by {f.get('source')}",
    Happened.REFUSED: lambda f: (
        f"registration {f.get('reason')}: {_short(f.get('error'))}; in the registrations DLQ"
    ),
}
DETAILS[Happened.CONFLICT] = DETAILS[Happened.DUPLICATE]


def parse(message: str, fallback_at: float) -> JobEventLine | None:
    """The job event a log line tells, or None when it tells none."""
    if len(message) > MAX_LINE_BYTES:
        return None
    try:
        record = json.loads(message)
    except ValueError:
        return None
    if not isinstance(record, dict) or record.get(JOB_EVENT) not in KINDS:
        return None
    kind = str(record[JOB_EVENT])
    job_id = record.get("job_id")
    fields = {k: v for k, v in record.items() if k not in _BOILERPLATE}
    return JobEventLine(
        fallback_at,
        kind,
        job_id if isinstance(job_id, str) and job_id else None,
        DETAILS[kind](fields),
        fields,
    )


class Follower:
    """Reads the job events the log groups received since ``since``, each once."""

    def __init__(
        self,
        logs: Any,
        groups: Iterable[str],
        since: float,
        lag_seconds: float = LAG_SECONDS,
        page_size: int | None = None,
    ) -> None:
        """``page_size``: lines a page holds (default: CloudWatch's, 10,000)."""
        self._logs = logs
        self._page = {"limit": page_size} if page_size else {}
        self._groups = list(groups)
        self._since_ms = int(since * 1000)
        self._lag_ms = int(lag_seconds * 1000)
        self._start = dict.fromkeys(self._groups, self._since_ms)
        self._seen: dict[tuple[str, str], int] = {}

    def read(self, now: float) -> list[JobEventLine]:
        """The lines not read before, oldest first; ``now`` is when the read is made."""
        now_ms = int(now * 1000)
        fresh: list[tuple[int, str, str, JobEventLine]] = []
        for group in self._groups:
            events, caught_up = self._events(group)
            for event in events:
                key = (group, str(event["eventId"]))
                if key in self._seen:
                    continue
                self._seen[key] = int(event["timestamp"])
                found = parse(str(event.get("message", "")), int(event["timestamp"]) / 1000)
                if found is not None:
                    fresh.append((int(event["timestamp"]), group, key[1], found))
            # Caught up: from the lag before now. Not (more pages wait): from the
            # newest line read, so a long --since goes forward read by read.
            newest = max((int(e["timestamp"]) for e in events), default=self._start[group])
            self._start[group] = max(self._since_ms, now_ms - self._lag_ms if caught_up else newest)
        oldest = min(self._start.values(), default=self._since_ms)
        self._seen = {key: at for key, at in self._seen.items() if at >= oldest}
        fresh.sort(key=lambda item: item[:3])
        return [found for *_, found in fresh]

    def _events(self, group: str) -> tuple[list[dict[str, Any]], bool]:
        """The group's lines from its start; False when ``MAX_PAGES`` left some unread."""
        kw: dict[str, Any] = {
            "logGroupName": group,
            "startTime": self._start[group],
            "filterPattern": FILTER_PATTERN,
            **self._page,
        }
        events: list[dict[str, Any]] = []
        for _ in range(MAX_PAGES):
            page = self._logs.filter_log_events(**kw)
            events.extend(page.get("events", []))
            token = page.get("nextToken")
            if not token:
                return events, True
            kw["nextToken"] = token
        return events, False


def follow(
    follower: Follower,
    show: Callable[[JobEventLine], None],
    clock: Callable[[], float],
    sleep: Callable[[float], None],
    every: float,
) -> None:
    """Show each new line, read after read, until interrupted."""
    while True:
        for found in follower.read(clock()):
            show(found)
        sleep(every)
