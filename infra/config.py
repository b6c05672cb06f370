"""One stage's settings, read from CDK context (``cdk.json`` or ``-c key=value``).

Every knob has a default, so ``-c stage=prod`` alone is a complete deployment.
Values from the command line arrive as strings; they are checked here, once,
so a typo fails the synth with the key's name instead of deploying nonsense.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from infra.capacity import (
    CONCURRENT_COPIES,
    DEFAULT_API_BURST_QUOTA,
    DEFAULT_API_RATE_QUOTA,
    DEFAULT_DYNAMODB_TABLE_QUOTA,
    DEFAULT_LAMBDA_CONCURRENCY_QUOTA,
    DEFAULT_PEAK_JOBS_PER_SECOND,
    MAX_EVENT_SOURCE_CONCURRENCY,
    MAX_PEAK_JOBS_PER_SECOND,
    MIN_EVENT_SOURCE_CONCURRENCY,
    NEW_TABLE_READ_UNITS,
    NEW_TABLE_WRITE_UNITS,
    REGISTRATION_PLANNED_SECONDS,
    SUME_MAX_ATTEMPTS,
    WORKER_PLANNED_SECONDS_PER_JOB,
    Account,
    Capacity,
    Fixed,
    capacity,
    default_throttle,
    event_source_cap,
    planned_write_units,
    poller_runs,
    put_events_quota,
    receiver_concurrency,
    refusal,
    sume_worst_case_rate,
    weakest,
)
from infra.spec import DEFAULT_POLL_RATE_MINUTES, POLLER_TIMEOUT
from sume.core.names import DUE_SHARDS, MAX_DUE_SHARDS

STAGE_PATTERN = re.compile(r"^[a-z][a-z0-9-]{0,23}$")
DEFAULT_STAGE = "dev"

# CloudWatch Logs only accepts these retention periods (days -> the name of
# aws_logs.RetentionDays' member, which the stack passes on).
LOG_RETENTION = {
    1: "ONE_DAY",
    3: "THREE_DAYS",
    5: "FIVE_DAYS",
    7: "ONE_WEEK",
    14: "TWO_WEEKS",
    30: "ONE_MONTH",
    60: "TWO_MONTHS",
    90: "THREE_MONTHS",
    180: "SIX_MONTHS",
    365: "ONE_YEAR",
}

# Silence alarms (docs/operations.md, "Alarms and dashboard"). Each window
# must hold at least two poller runs whatever the clock's alignment, so it
# always sees the poller's metrics; CloudWatch evaluates at most a day.
SILENCE_RUNS_PER_WINDOW = 2
MAX_ALARM_WINDOW_MINUTES = 1440
# Work paused longer than this pages (docs/operations.md, "Pausing the work").
DEFAULT_PAUSED_ALARM_MINUTES = 240


@dataclass(frozen=True)
class SilenceAlarms:
    """When the stack pages because Sume's webhooks stopped coming."""

    recovered_share_percent: int
    """``PollRecoveryShare``: endings found by polling, in percent of all, that page."""
    recovered_window_minutes: int
    recovered_min_endings: int
    """Fewer endings than this in a window never page: one poll recovery of one job is no
    outage."""
    delivery_silence_minutes: int
    """``DeliverySilence``: this long without a verified delivery while jobs await pages."""
    paused_minutes: int = DEFAULT_PAUSED_ALARM_MINUTES
    """``WorkerPaused``/``PollerPaused``: work not started for this long pages."""


# An allow-list entry: a host name as the functions compare it (lowercase
# ASCII, IDNA for international names), or *.domain for its subdomains.
_HOST_ENTRY = re.compile(
    r"^(\*\.)?[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$"
)

# Context key -> default. Documented in docs/operations.md ("Settings").
DEFAULTS: Mapping[str, Any] = {
    "sume_peak_jobs_per_second": DEFAULT_PEAK_JOBS_PER_SECOND,
    # None: derived from sume_peak_jobs_per_second by default_throttle.
    "throttle_rate": None,
    "throttle_burst": None,
    "api_rate_quota": DEFAULT_API_RATE_QUOTA,
    "api_burst_quota": DEFAULT_API_BURST_QUOTA,
    "api_client_error_threshold": 100,
    "poll_rate_minutes": DEFAULT_POLL_RATE_MINUTES,
    "due_shards": DUE_SHARDS,
    # None: no lowered count still draining (docs/operations.md, "Changing the shard count").
    "due_shards_previous": None,
    "poller_shards_per_run": 1,
    # None: no live table migrating to a new due-work index (docs/operations.md,
    # "Changing an index's projection"); "add", then "switch", while one does.
    "due_index_migration": None,
    "alarm_email": "",
    "log_retention_days": 30,
    "log_level": "INFO",
    "worker_batch_size": 10,
    "worker_batching_window_seconds": 5,
    # None: derived from sume_peak_jobs_per_second by event_source_cap.
    "worker_max_concurrency": None,
    "registrations_max_concurrency": None,
    # None: derived from sume_peak_jobs_per_second by receiver_concurrency; 0: none reserved.
    "receiver_reserved_concurrency": None,
    "lambda_concurrency_quota": DEFAULT_LAMBDA_CONCURRENCY_QUOTA,
    # None: the region's default (infra/capacity.py, PUT_EVENTS_QUOTAS).
    "eventbridge_put_events_quota": None,
    # None: what Sume's worst case needs (planned_write_units; no reads), when
    # a new table could not serve it at once; 0: none.
    "table_warm_writes_per_second": None,
    "table_warm_reads_per_second": None,
    "dynamodb_table_quota": DEFAULT_DYNAMODB_TABLE_QUOTA,
    "signature_rejection_threshold": 20,
    "poll_recovery_share_percent": 50,
    "poll_recovery_window_minutes": 60,
    "poll_recovery_min_endings": 5,
    "delivery_silence_minutes": 60,
    "paused_alarm_minutes": DEFAULT_PAUSED_ALARM_MINUTES,
    "retention_days": 35,
    # None: as long as retention_days (a job's item, and so its dedupe, lives that long).
    "announcements_archive_days": None,
    "payloads_expire_days": 90,
    "artifacts_infrequent_access_days": 30,
    "artifact_allowed_hosts": "",
    "status_allowed_hosts": "",
}


# The steps of a live table's move to a new due-work index; None when none is under way.
DUE_INDEX_MIGRATION = (None, "add", "switch")


class ConfigError(ValueError):
    """A context value that cannot be deployed."""


def is_dev_stage(stage: str) -> bool:
    """Dev stages are disposable: their data may be destroyed with the stack."""
    return stage == DEFAULT_STAGE or stage.startswith(f"{DEFAULT_STAGE}-")


@dataclass(frozen=True)
class StageConfig:
    stage: str
    throttle_rate: int
    throttle_burst: int
    api_client_error_threshold: int
    poll_rate_minutes: int
    alarm_email: str | None
    log_retention: str
    """The name of the ``aws_logs.RetentionDays`` member (LOG_RETENTION)."""
    log_level: str
    worker_batch_size: int
    worker_batching_window_seconds: int
    worker_max_concurrency: int
    signature_rejection_threshold: int
    silence: SilenceAlarms
    retention_days: int
    announcements_archive_days: int
    payloads_expire_days: int
    artifacts_infrequent_access_days: int
    artifact_allowed_hosts: str
    status_allowed_hosts: str
    registrations_max_concurrency: int
    due_shards: int
    """Shards of the due-work index every writer spreads items over."""
    due_shards_previous: int | None
    """A larger count the poller still reads while its extra shards drain; None: none."""
    poller_shards_per_run: int
    due_index_migration: str | None
    """``add`` or ``switch`` while a live table migrates to a new due-work index; None: not."""
    receiver_reserved_concurrency: int | None
    """None: the receiver reserves no concurrency."""
    table_warm_writes_per_second: int | None
    table_warm_reads_per_second: int | None
    """Warm throughput of the jobs table and its index; None: DynamoDB's own."""
    capacity: Capacity
    """The most Sume jobs a second the stage takes at the worst case, and what binds next."""

    @property
    def is_dev(self) -> bool:
        return is_dev_stage(self.stage)

    @classmethod
    def from_context(
        cls,
        stage: str,
        lookup: Callable[[str], Any],
        overrides: Mapping[str, Any] | None = None,
        regions: tuple[str, ...] = (),
    ) -> StageConfig:
        """The stage's settings; ``regions``: those of a two-region stage (each is checked
        alone, as it takes the whole load after a failover), empty for one region."""
        if not STAGE_PATTERN.match(stage):
            raise ConfigError(
                f"stage {stage!r} must be lowercase letters, digits and '-', "
                "start with a letter, at most 24 characters"
            )
        values = {key: _pick(key, lookup, overrides or {}) for key in DEFAULTS}

        def number(key: str, low: int, high: int) -> int:
            raw = values[key]
            try:
                value = int(raw)
            except (TypeError, ValueError):
                raise ConfigError(f"context {key} must be an integer, got {raw!r}") from None
            if not low <= value <= high:
                raise ConfigError(f"context {key} must be within {low}..{high}, got {value}")
            return value

        retention = number("log_retention_days", 1, 365)
        if retention not in LOG_RETENTION:
            raise ConfigError(f"context log_retention_days must be one of {sorted(LOG_RETENTION)}")
        log_level = str(values["log_level"]).upper()
        if log_level not in {"DEBUG", "INFO", "WARN", "ERROR"}:
            raise ConfigError("context log_level must be DEBUG, INFO, WARN or ERROR")
        retention_days = number("retention_days", 1, 3650)
        payloads_days = number("payloads_expire_days", 1, 3650)
        # By default as long as a job's item, and so its dedupe, lives.
        archive_days = (
            retention_days
            if values["announcements_archive_days"] is None
            else number("announcements_archive_days", 1, 3650)
        )
        # A large event's body lives only in the payloads bucket: it must
        # outlive the job item that points to it.
        if payloads_days <= retention_days:
            raise ConfigError("context payloads_expire_days must exceed retention_days")
        poll_rate = number("poll_rate_minutes", 1, 1440)
        # A run may last the poller's whole timeout; the next tick must not
        # start while it is still going.
        if poll_rate * 60 < POLLER_TIMEOUT:
            raise ConfigError(
                f"context poll_rate_minutes must cover the poller's {POLLER_TIMEOUT} s timeout"
            )
        batch_size = number("worker_batch_size", 1, 10_000)
        batching_window = number("worker_batching_window_seconds", 0, 300)
        if batch_size > 10 and batching_window < 1:
            raise ConfigError(
                "context worker_batch_size over 10 needs worker_batching_window_seconds >= 1"
            )
        peak = number("sume_peak_jobs_per_second", 1, MAX_PEAK_JOBS_PER_SECOND)
        throttle_rate, throttle_burst = _throttle(values, number, peak)
        status_hosts = _host_list(values, "status_allowed_hosts")
        if not status_hosts and not is_dev_stage(stage):
            raise ConfigError(
                f"context status_allowed_hosts must be set for stage {stage!r}: the poller "
                "sends Sume's API token only to these hosts (e.g. "
                "-c status_allowed_hosts=api.sume.example; *.example.com for subdomains)"
            )
        worker_cap = _event_source_cap(
            values, number, "worker_max_concurrency", peak, WORKER_PLANNED_SECONDS_PER_JOB
        )
        registrations_cap = _event_source_cap(
            values, number, "registrations_max_concurrency", peak, REGISTRATION_PLANNED_SECONDS
        )
        shards = number("due_shards", 1, MAX_DUE_SHARDS)
        previous = None
        if values["due_shards_previous"] is not None:
            previous = number("due_shards_previous", 1, MAX_DUE_SHARDS)
        per_run = number("poller_shards_per_run", 1, MAX_DUE_SHARDS)
        reserved = _receiver_reservation(values, number, peak)
        found = _capacity(
            values,
            number,
            peak,
            regions,
            Fixed(
                poller_runs=poller_runs(shards, previous, per_run),
                due_shards=shards,
                throttle_rate=_given(values, "throttle_rate", throttle_rate),
                throttle_burst=_given(values, "throttle_burst", throttle_burst),
                worker_max_concurrency=_given(values, "worker_max_concurrency", worker_cap),
                registrations_max_concurrency=_given(
                    values, "registrations_max_concurrency", registrations_cap
                ),
                receiver_reserved_concurrency=_given(
                    values, "receiver_reserved_concurrency", reserved or 0
                ),
            ),
        )
        migration = values["due_index_migration"] or None
        if migration not in DUE_INDEX_MIGRATION:
            raise ConfigError(
                f"context due_index_migration must be add or switch (or unset), got {migration!r}"
            )
        email = str(values["alarm_email"] or "").strip()
        if email and "@" not in email:
            raise ConfigError(f"context alarm_email is not an e-mail address: {email!r}")
        return cls(
            stage=stage,
            throttle_rate=throttle_rate,
            throttle_burst=throttle_burst,
            api_client_error_threshold=number("api_client_error_threshold", 1, 1_000_000),
            poll_rate_minutes=poll_rate,
            alarm_email=email or None,
            log_retention=LOG_RETENTION[retention],
            log_level=log_level,
            worker_batch_size=batch_size,
            worker_batching_window_seconds=batching_window,
            worker_max_concurrency=worker_cap,
            signature_rejection_threshold=number("signature_rejection_threshold", 1, 1_000_000),
            silence=_silence(number, poll_rate),
            retention_days=retention_days,
            announcements_archive_days=archive_days,
            payloads_expire_days=payloads_days,
            artifacts_infrequent_access_days=number("artifacts_infrequent_access_days", 30, 3650),
            artifact_allowed_hosts=_host_list(values, "artifact_allowed_hosts"),
            status_allowed_hosts=status_hosts,
            registrations_max_concurrency=registrations_cap,
            due_shards=shards,
            due_shards_previous=previous,
            poller_shards_per_run=per_run,
            due_index_migration=migration,
            receiver_reserved_concurrency=reserved,
            **_warm_throughput(values, number, planned_write_units(peak, throttle_rate)),
            capacity=found,
        )


Number = Callable[[str, int, int], int]


def _silence(number: Number, poll_rate_minutes: int) -> SilenceAlarms:
    shortest = SILENCE_RUNS_PER_WINDOW * poll_rate_minutes

    def window(key: str) -> int:
        if shortest > MAX_ALARM_WINDOW_MINUTES:
            raise ConfigError(
                f"context {key}: poll_rate_minutes={poll_rate_minutes} leaves no window with "
                f"{SILENCE_RUNS_PER_WINDOW} poller runs within CloudWatch's "
                f"{MAX_ALARM_WINDOW_MINUTES} minutes: lower poll_rate_minutes"
            )
        return number(key, shortest, MAX_ALARM_WINDOW_MINUTES)

    return SilenceAlarms(
        recovered_share_percent=number("poll_recovery_share_percent", 1, 100),
        recovered_window_minutes=window("poll_recovery_window_minutes"),
        recovered_min_endings=number("poll_recovery_min_endings", 1, 1_000_000),
        delivery_silence_minutes=window("delivery_silence_minutes"),
        paused_minutes=window("paused_alarm_minutes"),
    )


def _throttle(values: Mapping[str, Any], number: Number, peak: int) -> tuple[int, int]:
    """The stage's (rate, burst): derived from the capacity estimate unless set, never below it.

    A derived one the account's quotas cannot hold is the capacity plan's to
    refuse (``_capacity``), naming the quota.
    """
    rate_quota = number("api_rate_quota", 1, 10_000_000)
    burst_quota = number("api_burst_quota", 1, 10_000_000)
    needed = sume_worst_case_rate(peak)
    rate, burst = default_throttle(peak, rate_quota, burst_quota)
    if values["throttle_rate"] is not None:
        rate = number("throttle_rate", 1, rate_quota)
    if values["throttle_burst"] is not None:
        burst = number("throttle_burst", 1, burst_quota)
    for key, value in (("throttle_rate", rate), ("throttle_burst", burst)):
        if values[key] is not None and value < needed:
            raise ConfigError(
                f"context {key} ({value}) is below Sume's worst case of {needed} requests/s "
                f"for sume_peak_jobs_per_second={peak} ({SUME_MAX_ATTEMPTS} attempts x "
                f"{CONCURRENT_COPIES} concurrent copies): our 429s would use up Sume's retries"
            )
    return rate, burst


def _event_source_cap(
    values: Mapping[str, Any], number: Number, key: str, peak: int, seconds_each: float
) -> int:
    """An event source's maximum concurrency: what the estimate needs, unless set.

    A derived one past SQS's 1,000 is the capacity plan's to refuse.
    """
    if values[key] is not None:
        return number(key, MIN_EVENT_SOURCE_CONCURRENCY, MAX_EVENT_SOURCE_CONCURRENCY)
    return event_source_cap(peak, seconds_each)


def _given(values: Mapping[str, Any], key: str, value: int) -> int | None:
    """``value`` when the context set ``key``; None when it is derived from the peak."""
    return value if values[key] is not None else None


def _capacity(
    values: Mapping[str, Any],
    number: Number,
    peak: int,
    regions: tuple[str, ...],
    fixed: Fixed,
) -> Capacity:
    """What the stage takes in each of its regions' quotas; past it, one line naming the
    quota that binds first and the Service Quotas request that lifts it."""
    put_events = values["eventbridge_put_events_quota"]
    accounts = [
        Account(
            region=region,
            api_rate=number("api_rate_quota", 1, 10_000_000),
            api_burst=number("api_burst_quota", 1, 10_000_000),
            lambda_concurrency=number("lambda_concurrency_quota", 10, 10_000_000),
            dynamodb_table=number("dynamodb_table_quota", 1, 10_000_000),
            put_events=put_events_quota(region)
            if put_events is None
            else number("eventbridge_put_events_quota", 1, 10_000_000),
        )
        for region in (regions or (None,))
    ]
    found = [capacity(account, fixed) for account in accounts]
    stage = weakest(found)
    if peak > stage.jobs_per_second:
        account = accounts[found.index(stage)]
        raise ConfigError(refusal(peak, stage, account, fixed))
    return stage


def _warm_throughput(values: Mapping[str, Any], number: Number, writes: int) -> dict[str, Any]:
    """Warm writes and reads of the jobs table and its index; None leaves DynamoDB's own.

    Each defaults to what Sume's worst case needs (``writes`` units/s; no
    reads: a delivery reads nothing, the poller reads the index), set only
    when a new table could not serve it at once: warm throughput is billed
    when raised and cannot be lowered.
    """
    quota = number("dynamodb_table_quota", 1, 10_000_000)

    def warm(key: str, baseline: int, planned: int) -> int | None:
        if values[key] is None:
            value, source = planned, f"{planned}, planned for Sume's worst case"
            if value <= baseline:
                return None
        else:
            value = number(key, 0, 10_000_000)
            source = str(value)
            if 0 < value < baseline:
                raise ConfigError(
                    f"context {key} ({value}) is below the {baseline} units/s a new on-demand "
                    "table serves at once; warm throughput only raises it (0 sets none)"
                )
        if value > quota:
            raise ConfigError(
                f"context {key} ({source}) is above dynamodb_table_quota ({quota} units/s "
                "per table): request an increase in Service Quotas, then set "
                "dynamodb_table_quota"
            )
        return value or None

    return {
        "table_warm_writes_per_second": warm(
            "table_warm_writes_per_second", NEW_TABLE_WRITE_UNITS, writes
        ),
        "table_warm_reads_per_second": warm("table_warm_reads_per_second", NEW_TABLE_READ_UNITS, 0),
    }


def _receiver_reservation(values: Mapping[str, Any], number: Number, peak: int) -> int | None:
    """The receiver's reserved concurrency: Sume's worst case at a cold start, unless set;
    0 is none. Whether the account's quota holds it is the capacity plan's to check."""
    needed = receiver_concurrency(peak)
    if values["receiver_reserved_concurrency"] is None:
        return needed
    reserved = number("receiver_reserved_concurrency", 0, 10_000_000)
    if 0 < reserved < needed:
        raise ConfigError(
            f"context receiver_reserved_concurrency ({reserved}) is below the {needed} "
            f"receivers Sume's worst case keeps busy at a cold start "
            f"(sume_peak_jobs_per_second={peak}): Lambda would throttle Sume's deliveries "
            "(0 reserves none)"
        )
    return reserved or None


def _host_list(values: Mapping[str, Any], key: str) -> str:
    """A comma-separated allow-list, each entry a host name or ``*.domain``."""
    entries = [e.strip().lower() for e in str(values[key] or "").split(",") if e.strip()]
    for entry in entries:
        if not _HOST_ENTRY.match(entry):
            raise ConfigError(
                f"context {key}: {entry!r} is not a host name or *.domain "
                "(no scheme, port or path; international names in IDNA form)"
            )
    return ",".join(entries)


def _pick(key: str, lookup: Callable[[str], Any], overrides: Mapping[str, Any]) -> Any:
    if key in overrides:
        return overrides[key]
    value = lookup(key)
    return DEFAULTS[key] if value is None else value
