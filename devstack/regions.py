"""Two regional stacks on one moto server, their jobs table one MRSC global table.

What AWS would run in two regions of one MRSC region set runs here as one
process per region (``python -m devstack.regions``, its settings on stdin), each a whole
``DevStack`` (API and receiver, queue and worker, poller, buckets, bus) signing
for its own region, as the three functions would in their own containers. The
moto server runs in the process that holds ``Regions``, with
``devstack.moto_mrsc`` installed: every region's DynamoDB calls reach one
table, and writes racing another region's can be answered with
``ReplicatedWriteConflictException``. ``Regions.take_down`` plays a region's
outage: its API, worker and poller stop and every AWS call reaching that region
is refused (``devstack.moto_outage``). ``Failover`` plays Route 53's failover
record in front of the two webhook URLs, from each region's ``GET /health``.
docs/regions.md says how it works and what it does not show.
"""

from __future__ import annotations

import http.client
import json
import logging
import os
import secrets
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import IO, Any
from urllib.parse import urlsplit

import boto3

from devstack.resources import subscribe_queue
from devstack.settings import FAKE_CREDENTIALS
from infra.spec import ResourceNames
from sume.core.names import HEALTH_PATH, WEBHOOK_PATH, Env
from sume.core.settings import TableSettings
from sume.store.compose import build_jobs
from sume.store.jobs import JobsTable

HOST = "127.0.0.1"
START_TIMEOUT_SECONDS = 120.0
STOP_RECEIVER = "stop-receiver"
GO_DOWN = "down"
HALT = "halt"
_FAKE_CREDENTIALS = {k.lower(): v for k, v in FAKE_CREDENTIALS.items()}


@dataclass(frozen=True)
class JournalLine:
    at: float
    kind: str
    job_id: str | None
    detail: str


@dataclass
class Region:
    """One regional stack, running in its own process."""

    name: str
    url: str
    names: ResourceNames
    process: subprocess.Popen[str]
    journal: list[JournalLine] = field(default_factory=list)
    announcements: list[dict[str, Any]] = field(default_factory=list)
    """Read from the consumer's queue on this region's bus (``Regions.read_announcements``)."""
    consumer_queue_url: str = ""
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stopped: threading.Event = field(default_factory=threading.Event)
    _down: threading.Event = field(default_factory=threading.Event)
    _halted: threading.Event = field(default_factory=threading.Event)
    down_at: float | None = None
    """When ``Regions.take_down`` began taking it down (Unix time)."""

    def entries(self, kind: str) -> list[JournalLine]:
        with self._lock:
            return [line for line in self.journal if line.kind == kind]


class Regions:
    """moto with one MRSC table, and one child process per region, the first its home."""

    def __init__(
        self,
        regions: Sequence[str],
        *,
        conflict_share: float = 0.0,
        window_seconds: float = 1.0,
        seed: int = 0,
        api_token: str | None = None,
        lambda_env: Mapping[str, str] | None = None,
        poll_every_seconds: float = 1.0,
        retry_delay_seconds: int = 1,
    ) -> None:
        from devstack.moto_mrsc import Replication

        if len(set(regions)) < 2:
            raise ValueError("a global table spans at least two regions")
        self.replication = Replication(
            home=regions[0],
            regions=frozenset(regions),
            conflict_share=conflict_share,
            window_seconds=window_seconds,
            seed=seed,
        )
        self.order = list(regions)
        self.signing_secret = f"whsec_dev_{secrets.token_hex(16)}"
        self.api_token = api_token or f"sume_dev_{secrets.token_hex(12)}"
        self.prefix = f"sume-{secrets.token_hex(3)}"
        self.table = ""
        """The one jobs table, named by the home region, which creates it."""
        self.leases_table = ""
        """The one shard leases table, likewise (infra/scheduling.py: a global table)."""
        self._lambda_env = dict(lambda_env or {})
        self._poll_every = poll_every_seconds
        self._retry_delay = retry_delay_seconds
        self._moto: Any = None
        self.endpoint_url = ""
        self.regions: dict[str, Region] = {}
        self._session = boto3.session.Session(**_FAKE_CREDENTIALS)

    def __enter__(self) -> Regions:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> Regions:
        from devstack import moto_atomic, moto_limits, moto_mrsc, switches
        from devstack.loopback import moto_server

        moto_atomic.install()
        moto_limits.install()
        switches.install()
        moto_mrsc.install(self.replication)
        # moto's werkzeug logs every AWS call; the journals say what matters.
        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        # Every region's process starts at once (most of a start is Python importing
        # the stack); each is told its settings once the one before it is up.
        spawned = [self._spawn() for _ in self.order]
        try:
            self._moto = moto_server(0)
            self.endpoint_url = "http://{}:{}".format(*self._moto.get_host_and_port())
            # One after the other: the home region creates the table the others use.
            for name, process in zip(self.order, spawned, strict=True):
                self.regions[name] = region = self._launch(name, process)
                self.table = region.names.table
                self.leases_table = region.names.leases_table
        except BaseException:
            for process in spawned[len(self.regions) :]:
                process.kill()
                process.wait()
            self.stop()
            raise
        return self

    def _spawn(self) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-m", "devstack.regions"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env={k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"},
        )

    def _launch(self, name: str, process: subprocess.Popen[str]) -> Region:
        config = {
            "region": name,
            "moto_endpoint": self.endpoint_url,
            "prefix": f"{self.prefix}-{name}",
            "jobs_table": self.table or None,
            "leases_table": self.leases_table or None,
            "signing_secret": self.signing_secret,
            "api_token": self.api_token,
            "lambda_env": {**self._region_env(name), **self._lambda_env},
            "poll_every_seconds": self._poll_every,
            "retry_delay_seconds": self._retry_delay,
        }
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write(json.dumps(config) + "\n")
        process.stdin.flush()
        ready = _ready(process.stdout, START_TIMEOUT_SECONDS)
        region = Region(name, ready["url"], ResourceNames(**ready["names"]), process)
        threading.Thread(target=_follow, args=(region,), daemon=True).start()
        region.consumer_queue_url = subscribe_queue(
            self.client("sqs", name),
            self.client("events", name),
            f"{region.names.event_bus}-consumer",
            region.names.event_bus,
        )
        return region

    def _region_env(self, name: str) -> dict[str, str]:
        """What the two-region stacks set (infra/stack.py): the other region's payloads
        bucket, written with every large event, and rounds named by the schedule's period."""
        peer = next(region for region in self.order if region != name)
        return {
            Env.PEER_REGION: peer,
            # Its stack makes it later under this name (devstack.resources).
            Env.PEER_PAYLOADS_BUCKET_NAME: f"{self.prefix}-{peer}-payloads",
            Env.POLL_ROUND_SECONDS: str(max(1, round(self._poll_every))),
        }

    def stop_receiver(self, name: str) -> None:
        """Take one region's webhook route down; its worker and poller carry on."""
        region = self.regions[name]
        self._tell(region, STOP_RECEIVER)
        if not region._stopped.wait(30):
            raise TimeoutError(f"{name}'s receiver did not stop")

    def halt(self, name: str) -> None:
        """A region's outage as it may begin: its worker, poller and queue readers stop
        taking work, its API still acknowledging deliveries (whose work then waits,
        owed, in its queue)."""
        region = self.regions[name]
        self._tell(region, HALT)
        if not region._halted.wait(30):
            raise TimeoutError(f"{name}'s loops did not stop")

    def take_down(self, name: str) -> None:
        """One region's outage: its API refuses connections, its worker, poller and
        queue readers stop (an invocation in flight finishes first), and from then on
        every AWS call reaching the region (its table endpoint, queues, buckets, bus,
        secrets) is refused, whoever makes it. The jobs table stays served in the
        other regions, as MRSC's is."""
        from devstack import moto_outage

        region = self.regions[name]
        region.down_at = time.time()
        self._tell(region, GO_DOWN)
        if not region._down.wait(60):
            raise TimeoutError(f"{name}'s stack did not stop")
        moto_outage.take_down(name)

    def bring_back(self, name: str) -> None:
        """The region's AWS answers again (its stack's code stays stopped): what it
        held through the outage can be read."""
        from devstack import moto_outage

        moto_outage.bring_back(name)

    def up(self) -> list[Region]:
        """The regions not taken down, the home first."""
        return [r for r in self.regions.values() if r.down_at is None]

    def _tell(self, region: Region, command: str) -> None:
        assert region.process.stdin is not None
        region.process.stdin.write(command + "\n")
        region.process.stdin.flush()

    def stop(self) -> None:
        from devstack import moto_mrsc, moto_outage

        for region in self.regions.values():
            if region.process.stdin is not None:
                region.process.stdin.close()
        for region in self.regions.values():
            try:
                region.process.wait(30)
            except subprocess.TimeoutExpired:
                region.process.kill()
                region.process.wait()
        self.regions.clear()
        if self._moto:
            self._moto.stop()
            self._moto = None
        moto_mrsc.uninstall()
        moto_outage.reset()

    def client(self, service: str, region: str) -> Any:
        return self._session.client(service, region_name=region, endpoint_url=self.endpoint_url)

    def jobs(self, region: str | None = None) -> JobsTable:
        """The one jobs table, as the functions of ``region`` (default: the first one up)
        see it."""
        name = region or self.up()[0].name
        env = {
            # The functions' settings (DUE_SHARDS among them) say how they read it.
            **self._lambda_env,
            Env.JOBS_TABLE_NAME: self.table,
            Env.JOBS_QUEUE_URL: self.regions[name].names.queue_url,
        }
        return build_jobs(TableSettings.table_from(env), self.client("dynamodb", name))

    def read_announcements(self) -> None:
        """Move what each region's bus announced since the last read to its
        ``announcements`` (a region that is down is read once it is brought back)."""
        from devstack import moto_outage

        for region in self.regions.values():
            if region.name in moto_outage.down():
                continue
            sqs = self.client("sqs", region.name)
            while True:
                messages = sqs.receive_message(
                    QueueUrl=region.consumer_queue_url, MaxNumberOfMessages=10
                ).get("Messages", [])
                if not messages:
                    break
                for message in messages:
                    region.announcements.append(json.loads(message["Body"]))
                    sqs.delete_message(
                        QueueUrl=region.consumer_queue_url, ReceiptHandle=message["ReceiptHandle"]
                    )


def _ready(stdout: IO[str], timeout: float) -> dict[str, Any]:
    """The child's first JSON line, ``{"ready": ...}``; a child that dies first fails."""
    found: dict[str, Any] = {}

    def read() -> None:
        for line in stdout:
            message = _message(line)
            if "ready" in message:
                found.update(message["ready"])
                return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout)
    if not found:
        raise RuntimeError("a regional stack did not start (its stderr says why)")
    return found


def _follow(region: Region) -> None:
    assert region.process.stdout is not None
    for line in region.process.stdout:
        message = _message(line)
        if "entry" in message:
            with region._lock:
                region.journal.append(JournalLine(**message["entry"]))
        elif message.get("stopped") == "receiver":
            region._stopped.set()
        elif message.get("stopped") == "stack":
            region._down.set()
        elif message.get("stopped") == "loops":
            region._halted.set()


def _message(line: str) -> dict[str, Any]:
    try:
        message = json.loads(line)
    except ValueError:
        return {}
    return message if isinstance(message, dict) else {}


class Failover:
    """Route 53's failover record over two webhook URLs: the primary while its health
    check passes, the secondary once ``threshold`` checks in a row have failed, and
    the primary again once as many pass (fail back).

    The check is the deployed one's, ``GET /health`` on the primary's API (the
    webhook URL's host), passed by a 200 within ``timeout_seconds``: a region
    whose API is down refuses it, one whose receiver cannot read its table
    answers 503. Route 53 asks every 30 s and fails over after 3 failures; here
    every ``interval_seconds``.
    """

    def __init__(
        self,
        primary: str,
        secondary: str,
        interval_seconds: float = 0.1,
        threshold: int = 2,
        timeout_seconds: float = 2.0,
    ) -> None:
        self.primary = primary
        self.secondary = secondary
        self._address = _address(primary)
        self._interval = interval_seconds
        self._threshold = threshold
        self._timeout = timeout_seconds
        self._healthy = True
        self._streak = 0
        self.failed_over_at: float | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._check, name="route53", daemon=True)

    def __enter__(self) -> Failover:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def resolve(self) -> str:
        return self.primary if self._healthy else self.secondary

    def _check(self) -> None:
        while not self._stop.wait(self._interval):
            passed = health(self._address, self._timeout)
            self._streak = self._streak + 1 if passed != self._healthy else 0
            if self._streak >= self._threshold:
                self._healthy, self._streak = passed, 0
                if not passed:
                    self.failed_over_at = time.time()


def health(address: tuple[str, int], timeout: float) -> bool:
    """Whether ``GET /health`` at ``address`` answers 200 within ``timeout``."""
    connection = http.client.HTTPConnection(*address, timeout=timeout)
    try:
        connection.request("GET", HEALTH_PATH)
        return connection.getresponse().status == 200
    except (OSError, http.client.HTTPException):
        return False
    finally:
        connection.close()


def _address(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    if not parts.path.endswith(WEBHOOK_PATH):
        raise ValueError(f"{url} is not a webhook URL")
    return parts.hostname or HOST, parts.port or 80


def child(config: Mapping[str, Any]) -> int:
    """One regional stack: a JSON line when ready, one per journal entry, until stdin ends.

    Its settings (``config``) are stdin's first line.

    ``stop-receiver`` on stdin takes its webhook route down; ``halt`` stops its loops
    taking work (the API still answers); ``down`` the whole stack
    (its API first, so the health check fails at once, then its worker, poller and
    queue readers).
    """
    from devstack.journal import Entry
    from devstack.settings import DevStackSettings
    from devstack.stack import DevStack

    out = threading.Lock()

    def emit(message: dict[str, Any]) -> None:
        with out:
            sys.stdout.write(json.dumps(message) + "\n")
            sys.stdout.flush()

    def echo(entry: Entry) -> None:
        line = {"at": entry.at, "kind": entry.kind, "job_id": entry.job_id, "detail": entry.detail}
        emit({"entry": line})

    stack = DevStack(
        DevStackSettings(
            port=0,
            moto_port=0,
            signing_secret=config["signing_secret"],
            api_token=config["api_token"],
            prefix=config["prefix"],
            poll_every_seconds=config["poll_every_seconds"],
            retry_delay_seconds=config["retry_delay_seconds"],
            lambda_env=dict(config["lambda_env"]),
            region=config["region"],
            moto_endpoint=config["moto_endpoint"],
            jobs_table=config["jobs_table"],
            leases_table=config["leases_table"],
        ),
        echo=echo,
    )
    stack.start()
    try:
        assert stack.names is not None
        emit({"ready": {"url": stack.url, "names": asdict(stack.names)}})
        for line in sys.stdin:
            if line.strip() == STOP_RECEIVER:
                stack.stop_receiver()
                emit({"stopped": "receiver"})
            elif line.strip() == HALT:
                stack.halt()
                emit({"stopped": "loops"})
            elif line.strip() == GO_DOWN:
                stack.stop_receiver()
                stack.stop()
                emit({"stopped": "stack"})
    finally:
        stack.stop()
    return 0


if __name__ == "__main__":
    # Imported while the regions before this one start.
    import devstack.stack  # noqa: F401

    settings = sys.stdin.readline()
    # No settings: the regions stopped before this one's turn.
    raise SystemExit(child(json.loads(settings)) if settings else 0)
