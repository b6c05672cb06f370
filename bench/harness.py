"""What every section stands on: fake AWS and a loopback-only network, fresh processes,
signed deliveries, and the report's tables, targets and medians."""

from __future__ import annotations

import contextlib
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

from sume.core.names import Env

REGION, ACCOUNT = "us-east-1", "123456789012"
ROOT = Path(__file__).resolve().parents[1]
FUNCTIONS = ROOT / "functions"
MiB = 1024 * 1024

# None of the developer's real AWS settings may leak in: the bench must never
# reach AWS, and a stray profile would make it try.
FAKE_AWS: Mapping[str, str] = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": REGION,
    "AWS_REGION": REGION,
    "AWS_CONFIG_FILE": os.devnull,
    "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
    "AWS_EC2_METADATA_DISABLED": "true",
    "POWERTOOLS_TRACE_DISABLED": "true",
    "POWERTOOLS_DEV": "false",
    "POWERTOOLS_LOG_LEVEL": "INFO",
}
UNSET = ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN")
# Names for the stubbed runs: no resource is ever reached.
STUB_NAMES: Mapping[str, str] = {
    Env.JOBS_TABLE_NAME: "sume-bench-jobs",
    Env.JOBS_QUEUE_URL: f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/sume-bench-jobs",
    Env.PAYLOADS_BUCKET_NAME: "sume-bench-payloads",
    Env.SIGNING_SECRET_ARN: f"arn:aws:secretsmanager:{REGION}:{ACCOUNT}:secret:sume-bench-AbCdEf",
}
# Only the simulator serves artifact and status URLs, over http on loopback.
LOCAL_URLS = {Env.ALLOW_HTTP_URLS: "true", Env.ALLOW_PRIVATE_HOSTS: "true"}


def use_fake_aws() -> None:
    """Before anything creates a boto3 session."""
    for name in UNSET:
        os.environ.pop(name, None)
    os.environ.update(FAKE_AWS)


def forbid_network() -> None:
    """Refuse any connection or name lookup beyond loopback in this process: a client that
    escaped moto or the Stubber would try AWS with fake credentials."""
    real_connect, real_getaddrinfo = socket.socket.connect, socket.getaddrinfo

    def check(host: object) -> None:
        if str(host) not in ("127.0.0.1", "::1", "localhost"):
            raise ConnectionRefusedError(f"the bench stays on loopback; refused {host}")

    def connect(self: socket.socket, address: Any) -> None:
        if self.family in (socket.AF_INET, socket.AF_INET6):
            check(address[0])
        real_connect(self, address)

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        check(host.decode() if isinstance(host, bytes) else host)
        return real_getaddrinfo(host, *args, **kwargs)

    socket.socket.connect = connect  # type: ignore[method-assign,assignment]
    socket.getaddrinfo = getaddrinfo


def environment(values: Mapping[str, str]) -> Any:
    return mock.patch.dict(os.environ, values)


@contextmanager
def silenced() -> Iterator[None]:
    """fd 1 to /dev/null: the JSON logs and metrics are still formatted and written (that
    work is part of what is measured), just not shown."""
    sys.stdout.flush()
    saved, devnull = os.dup(1), os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)
        os.close(devnull)


def python(
    *args: str, env: Mapping[str, str], timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """This interpreter in a fresh process, on the bench's own code."""
    return subprocess.run(  # noqa: S603 - this interpreter running the bench's own code
        [sys.executable, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def last_json(out: subprocess.CompletedProcess[str], what: str) -> Any:
    """The JSON a bench process printed last; an error with its stderr when it printed none."""
    lines = out.stdout.strip().splitlines()
    if out.returncode or not lines:
        tail = "\n".join(out.stderr.strip().splitlines()[-15:])
        raise RuntimeError(f"{what} ended with code {out.returncode} and no result:\n{tail}")
    return json.loads(lines[-1])


def lambda_runtime_env() -> dict[str, str]:
    """A subprocess environment that looks like a Lambda container to Powertools."""
    env = {k: v for k, v in os.environ.items() if k not in UNSET}
    env |= {**FAKE_AWS, **STUB_NAMES, "LAMBDA_TASK_ROOT": str(FUNCTIONS)}
    env |= {"AWS_LAMBDA_FUNCTION_NAME": "sume-bench", "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "256"}
    env["AWS_EXECUTION_ENV"] = "AWS_Lambda_python3.13"
    env["PYTHONPATH"] = os.pathsep.join([str(FUNCTIONS), str(ROOT)])
    # Powertools traces only inside Lambda; as deployed it is on, so the import
    # cost of X-Ray and its patching is part of a real cold start.
    env.pop("POWERTOOLS_TRACE_DISABLED", None)
    # The Lambda runtime's boto3 is compiled; compiling every module on each import
    # would dwarf what is measured. The bytecode goes to .cache/, never into .venv.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(ROOT / ".cache" / "bench-pycache")
    return env


# Signed Sume deliveries as API Gateway events, built outside any timed region.
SECRET = "whsec_bench_secret"  # noqa: S105 - signs the bench's own deliveries, offline
ARTIFACT_URL = "https://cdn.sume.example/jobs/{job_id}/renders/{n}/output-1080p.mp4?sig={sig}"


def new_job_id() -> str:
    return f"job_{uuid.uuid4().hex[:20]}"


def job_body(job_id: str, event: str = "job.completed", pad_bytes: int = 0) -> bytes:
    """A terminal event shaped like Sume's, two artifacts; ``pad_bytes`` grows it."""
    data: dict[str, Any] = {
        "event": event,
        "job_id": job_id,
        "status": "OK" if event == "job.completed" else "ERROR",
        "created_at": "2026-11-29T00:00:00Z",
        "finished_at": "2026-11-29T00:03:12Z",
    }
    if event == "job.completed":
        urls = [ARTIFACT_URL.format(job_id=job_id, n=n, sig=uuid.uuid4().hex) for n in (1, 2)]
        data["payload"] = {"artifacts": urls, "duration_seconds": 192.4}
    else:
        data["error"] = {"code": "RENDER_FAILED", "message": "encoder exited with status 1"}
    if pad_bytes:
        data["metadata"] = {"notes": "x" * pad_bytes}
    return json.dumps(data, separators=(",", ":")).encode()


def delivery(body: bytes, skew_seconds: int = 0, secret: str = SECRET) -> dict[str, Any]:
    """The API Gateway event for one delivery of ``body``."""
    from devstack.apigw import http_api_event
    from sume.contract import signature
    from sume.core.names import WEBHOOK_PATH

    headers = {
        "content-type": "application/json",
        "user-agent": "Sume-Webhooks/1.0",
        **signature.headers(body, [secret], int(time.time()) - skew_seconds),
    }
    return http_api_event("POST", WEBHOOK_PATH, headers, body)


def forged(body: bytes) -> dict[str, Any]:
    return delivery(body, secret="not-" + SECRET)


# The report: markdown on stdout, progress on stderr.
def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    return "\n".join(lines + ["| " + " | ".join(str(c) for c in row) + " |" for row in rows])


def machine() -> str:
    model = platform.processor() or platform.machine()
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as info:
        model = next(
            (ln.split(":")[1].strip() for ln in info if ln.startswith("model name")), model
        )
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return (
        f"{os.cpu_count()} CPUs (nproc), {model}, Python {platform.python_version()}, "
        f"{platform.system()} {platform.machine()}, load average at start {load}"
    )


def paired_ratios(numerators: Sequence[float], denominators: Sequence[float]) -> list[float]:
    """Round by round, so a round's noise hits both sides of its ratio."""
    return [n / d for n, d in zip(numerators, denominators, strict=True)]


def paired_difference(left: Sequence[float], right: Sequence[float]) -> float:
    return statistics.median(a - b for a, b in zip(left, right, strict=True))


def spread(values: Sequence[float], unit: str = "x") -> str:
    """A figure that moves with the machine: its median, then the range of its runs."""
    return (
        f"{statistics.median(values):.2f}{unit} (runs {min(values):.2f}-{max(values):.2f}"
        f"{unit}, n={len(values)})"
    )


def verdict(met: bool | None) -> str:
    return "-" if met is None else ("met" if met else "**MISSED**")


@dataclass
class Targets:
    rows: list[tuple[str, str, bool | None]] = field(default_factory=list)

    def add(self, target: str, measured: str, met: bool | None) -> None:
        """``met`` None: shown, not judged (the row says why)."""
        self.rows.append((target, measured, met))


@dataclass
class Context:
    """A section's input: how thorough, where targets go, the reports it needs."""

    quick: bool = False
    targets: Targets = field(default_factory=Targets)
    reports: dict[str, Any] = field(default_factory=dict)
    artifact_bytes: int | None = None

    def pick(self, full: Any, quick: Any) -> Any:
        return quick if self.quick else full
