"""Section 3, cold start: what a fresh process spends importing each handler and building what
its first delivery needs, against the floor, in full and as SnapStart restores it.

Each figure is the median, over fresh interpreters, of the CPU time from just before the import
to just after (interpreter start-up, the same for all, is left out): on a shared machine the
wall clock mostly measures the neighbours (wall time is shown alongside). The processes look
like a Lambda container to Powertools (``LAMBDA_TASK_ROOT`` set), so the Tracer is on and
patches botocore as when deployed. The floor is what any correct receiver must do before its
first answer: import boto3, create the DynamoDB, SQS and Secrets Manager clients, and read its
signing secret once (``bench.secretstub`` answers the read, for the floor and the receiver alike).
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from bench import cost
from bench import harness as h
from infra.spec import RECEIVER_MEMORY_MB, RECEIVER_SNAPSTART

# A probe's code before CLOCK is a snapshot's part, run untimed. A restore runs the after-restore
# hooks the snapshot registered (with a stand-in for the runtime's ``snapshot_restore_py``, which
# Lambda's Python has), then the rest, on the clock. The guard first: a probe never leaves loopback.
CLOCK = "\n# clock\n"
PROBE = f"""
import sys, time, types
from bench.harness import forbid_network
forbid_network()
hooks = []
sys.modules['snapshot_restore_py'] = types.SimpleNamespace(register_after_restore=hooks.append)
snapshot, _, code = sys.argv[1].rpartition({CLOCK!r})
exec(snapshot)
wall, cpu = time.perf_counter(), time.process_time()
for hook in hooks:
    hook()
exec(code)
print([(time.process_time() - cpu) * 1000, (time.perf_counter() - wall) * 1000])
"""

FLOOR = "floor: boto3, 3 clients, 1 secret read"
FLOOR_IMPORTS = "import boto3\nfrom bench.secretstub import answer_secrets\n"
FLOOR_BUILDS = """s = boto3.session.Session()
s.client('dynamodb'); s.client('sqs'); sm = s.client('secretsmanager')
answer_secrets(sm)
assert sm.get_secret_value(SecretId='sume-bench')['SecretString'] == 'whsec_bench_cold_start'
"""
# A cold start pays what the first delivery builds (settings, clients, secret provider) and reads.
RECEIVER_FIRST_USE = "receiver + what its first delivery builds and reads"
RECEIVER_IMPORTS = """import receiver
from sume.core import aws
from sume.receiving.compose import ReceiverSettings, build_intake, build_signing_secrets
from bench.secretstub import answer_secrets
"""
RECEIVER_BUILDS = """settings = ReceiverSettings.from_env()
build_intake(settings)
secrets = build_signing_secrets(settings)
answer_secrets(aws.client('secretsmanager'))
assert secrets.current() == (b'whsec_bench_cold_start',)
"""
POWERTOOLS = "from aws_lambda_powertools import Logger, Metrics, Tracer\n"
BUILD_POWERTOOLS = "Logger(service='b'); Metrics(namespace='b', service='b'); Tracer(service='b')"
SECRETS_PROVIDER = "from aws_lambda_powertools.utilities.parameters import SecretsProvider\n"
VARIANTS: dict[str, str] = {
    "import boto3": "import boto3",
    FLOOR: FLOOR_IMPORTS + FLOOR_BUILDS,
    "Powertools Logger, Metrics, Tracer": POWERTOOLS + BUILD_POWERTOOLS,
    "... + parameters (SecretsProvider)": POWERTOOLS + SECRETS_PROVIDER + BUILD_POWERTOOLS,
    "import receiver": "import receiver",
    RECEIVER_FIRST_USE: RECEIVER_IMPORTS + RECEIVER_BUILDS,
    **{f"import {module}": f"import {module}" for module in ("worker", "poller")},
}
# Under SnapStart the imports are in the snapshot and the first delivery after a restore
# builds the rest (the receiver builds nothing at import): the same pair, on the clock.
RESTORED_FLOOR = FLOOR_IMPORTS + CLOCK + FLOOR_BUILDS
RESTORED_RECEIVER = RECEIVER_IMPORTS + CLOCK + RECEIVER_BUILDS

IMPORT_MARGIN_MS = 30.0
# Pairs of the floor and the receiver's first use: the judged pair's 40 narrow its median's
# 95 % interval (printed) to about +/- 5-8 ms, well inside the 30 ms margin it is judged on.
PAIRS, JUDGED_PAIRS = 20, 40


def median_interval(values: list[float]) -> tuple[float, float]:
    """A 95 % confidence interval of the median, from order statistics (no distribution assumed)."""
    ordered = sorted(values)
    k = max(0, math.floor((len(ordered) - 1.96 * math.sqrt(len(ordered))) / 2) - 1)
    return ordered[k], ordered[-1 - k]


@dataclass
class Gap:
    """The floor and the receiver's first use, paired run by run (CPU ms)."""

    floor_ms: list[float] = field(default_factory=list)
    receiver_ms: list[float] = field(default_factory=list)

    @property
    def differences(self) -> list[float]:
        return [r - f for r, f in zip(self.receiver_ms, self.floor_ms, strict=True)]

    def figure(self, kind: str = "") -> str:
        low, high = median_interval(self.differences)
        median, pairs = statistics.median(self.differences), len(self.floor_ms)
        return f"{median:+.0f} ms CPU{kind} ({low:+.0f} to {high:+.0f}, {pairs} pairs)"

    def line(self, what: str) -> str:
        diffs = self.differences
        q1, _, q3 = statistics.quantiles(diffs, n=4)
        return (
            f"{what}, median and its 95 % interval: **{self.figure()}**; quartiles {q1:+.0f} / "
            f"{q3:+.0f}, range {min(diffs):+.0f} to {max(diffs):+.0f}; floor median "
            f"{statistics.median(self.floor_ms):.0f} ms, receiver median "
            f"{statistics.median(self.receiver_ms):.0f} ms.\n"
        )


@dataclass
class ColdReport:
    gap: Gap = field(default_factory=Gap)
    restored: Gap = field(default_factory=Gap)  # the gap as SnapStart leaves it
    cpu_ms: dict[str, list[float]] = field(default_factory=dict)
    wall_ms: dict[str, list[float]] = field(default_factory=dict)
    tracer_off_ms: dict[str, list[float]] = field(default_factory=dict)
    imports: list[tuple[str, float, float]] = field(default_factory=list)  # ``importtime``'s


def _many(codes: list[str], env: dict[str, str]) -> list[list[float]]:
    """Two processes at a time: CPU time is each one's own, and the two of a pair meet
    the same moment of the machine (their wall time, shown aside, does not)."""
    with ThreadPoolExecutor(2) as pool:
        probes = pool.map(lambda code: h.python("-c", PROBE, code, env=env), codes)
        return [h.last_json(out, "a cold-start probe") for out in probes]


def importtime(code: str, env: dict[str, str]) -> list[tuple[str, float, float]]:
    """``python -X importtime``: (module, own ms, cumulative ms), heaviest first."""
    out = h.python("-X", "importtime", "-c", code, env=env)
    out.check_returncode()
    modules = []
    for line in out.stderr.splitlines():
        if line.startswith("import time:") and "imported package" not in line:
            own_us, cumulative_us, module = (part.strip() for part in line[12:].split("|"))
            modules.append((module, int(own_us) / 1000, int(cumulative_us) / 1000))
    return sorted(modules, key=lambda m: m[1], reverse=True)


def measure(runs: int) -> ColdReport:
    report = ColdReport()
    on = h.lambda_runtime_env()
    off = {**on, "POWERTOOLS_TRACE_DISABLED": "true"}
    _many([*VARIANTS.values(), RESTORED_FLOOR, RESTORED_RECEIVER], on)  # the bytecode cache
    again = ("import receiver", RECEIVER_FIRST_USE)
    for _ in range(runs):
        # Interleaved, so a noisy moment hits every variant alike.
        for name, (cpu, wall) in zip(VARIANTS, _many([*VARIANTS.values()], on), strict=True):
            report.cpu_ms.setdefault(name, []).append(cpu)
            report.wall_ms.setdefault(name, []).append(wall)
        for name, (cpu, _) in zip(again, _many([VARIANTS[n] for n in again], off), strict=True):
            report.tracer_off_ms.setdefault(name, []).append(cpu)
    judged = report.restored if RECEIVER_SNAPSTART else report.gap
    for gap, floor, ours in (
        (report.gap, VARIANTS[FLOOR], VARIANTS[RECEIVER_FIRST_USE]),
        (report.restored, RESTORED_FLOOR, RESTORED_RECEIVER),
    ):
        while len(gap.floor_ms) < (JUDGED_PAIRS if gap is judged else PAIRS):
            (floor_ms, _), (ours_ms, _) = _many([floor, ours], on)
            gap.floor_ms.append(floor_ms)
            gap.receiver_ms.append(ours_ms)
    report.imports = importtime("import receiver", on)
    return report


def section(ctx: h.Context) -> None:
    render(measure(ctx.pick(3, 1)), ctx.targets)


def render(report: ColdReport, targets: h.Targets) -> None:
    floor = report.cpu_ms[FLOOR]
    print(
        f"## 3. Cold start against an honest floor (fresh process, Lambda env, Tracer on; "
        f"CPU ms, median of {len(floor)} runs)\n"
    )
    rows = []
    for name, cpu in report.cpu_ms.items():
        wall, vs_floor = statistics.median(report.wall_ms[name]), h.paired_difference(cpu, floor)
        rows.append((name, f"{statistics.median(cpu):.0f}", f"{wall:.0f}", f"{vs_floor:+.0f}"))
    print(h.table(["import", "CPU ms", "wall ms", "vs floor (CPU)"], rows))
    print("\nWith the Tracer off (`POWERTOOLS_TRACE_DISABLED=true`):")
    for name, cpu in report.tracer_off_ms.items():
        vs_floor = h.paired_difference(cpu, floor)
        print(f"- {name}: {statistics.median(cpu):.0f} CPU ms, {vs_floor:+.0f}")
    packages: defaultdict[str, float] = defaultdict(float)
    for module, own, _ in report.imports:
        packages[module.split(".")[0]] += own
    heaviest = sorted(packages.items(), key=lambda kv: kv[1], reverse=True)[:10]
    print("\nHeaviest imports of `import receiver` (`-X importtime`, own ms per package):\n")
    print(h.table(["package", "ms"], [(p, f"{ms:.0f}") for p, ms in heaviest]))
    print("\nHeaviest single modules:\n")
    modules = [(m, f"{own:.0f}", f"{cum:.0f}") for m, own, cum in report.imports[:12]]
    print(h.table(["module", "own ms", "cumulative ms"], modules))
    print(f"\n{report.gap.line('Full init (import + first use) less the floor')}")
    print(report.restored.line("As SnapStart restores it (imports in the snapshot)"))
    month, per_million = cost.snapstart(RECEIVER_MEMORY_MB)
    print(
        f"SnapStart on the receiver ({'enabled' if RECEIVER_SNAPSTART else 'not enabled'}) at "
        f"{RECEIVER_MEMORY_MB} MB: {month:.2f} USD a month for the cached snapshot, "
        f"{per_million:.2f} USD per million restores (one per new container). The restore "
        "itself runs outside the process: AWS reports it as `Restore Duration`.\n"
    )
    off = h.paired_difference(report.tracer_off_ms[RECEIVER_FIRST_USE], floor)
    full_init = f"{report.gap.figure()} with the Tracer ({off:+.0f} ms without)"
    judged, what, measured = report.gap, "import + first use", full_init
    if RECEIVER_SNAPSTART:
        # As deployed a container is restored, not initialised: the full init runs once per deploy.
        judged, what = report.restored, "as deployed: restored by SnapStart"
        measured = f"{judged.figure(' restored')}; full init {full_init}, run once per deploy"
    targets.add(
        f"receiver cold start within {IMPORT_MARGIN_MS:.0f} ms of floor ({what})",
        measured,
        statistics.median(judged.differences) <= IMPORT_MARGIN_MS,
    )
