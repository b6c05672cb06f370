"""Section 3, cold start: what a fresh process spends importing each handler and building
what its first delivery needs, against the floor, in full and as SnapStart restores it.

Each figure is the median, over several fresh interpreters, of the CPU time
from just before the import to just after (interpreter start-up is the same
for all and left out). CPU time, because on a shared machine the wall clock
mostly measures the neighbours; wall time is kept alongside. The processes
look like a Lambda container to Powertools (``LAMBDA_TASK_ROOT`` set), so the
Tracer is on and patches botocore as it does when deployed.

The floor is what any correct receiver must do before its first answer:
import boto3, create the DynamoDB, SQS and Secrets Manager clients, and read
its signing secret once (then keep it). The secret read is answered at
botocore's ``before-send`` (``bench.secretstub``): serialisation,
signing and parsing run, the round trip does not, for the floor and the
receiver alike.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from bench import cost
from bench import harness as h
from bench.calls import HANDLERS
from infra.spec import RECEIVER_MEMORY_MB, RECEIVER_SNAPSTART

# What a variant runs before the clock starts (``setup``, then this line, then
# what is timed): a snapshot's part of the work.
CLOCK = "\n# clock\n"
# The guard is set before the clock starts: a probe never leaves loopback.
PROBE = f"""
import sys, time
CLOCK = {CLOCK!r}
from bench.harness import forbid_network
forbid_network()
setup, _, code = sys.argv[1].rpartition(CLOCK)
exec(setup)
wall, cpu = time.perf_counter(), time.process_time()
exec(code)
print([(time.process_time() - cpu) * 1000, (time.perf_counter() - wall) * 1000])
"""

FLOOR = "floor: boto3, 3 clients, 1 secret read"
RECEIVER_FIRST_USE = "receiver + what its first delivery builds and reads"

FLOOR_IMPORTS = "import boto3\nfrom bench.secretstub import answer_secrets\n"
FLOOR_BUILDS = (
    "s = boto3.session.Session()\n"
    "s.client('dynamodb'); s.client('sqs'); sm = s.client('secretsmanager')\n"
    "answer_secrets(sm)\n"
    "secret = sm.get_secret_value(SecretId='sume-bench')['SecretString']\n"
    "assert secret == 'whsec_bench_cold_start'"
)
RECEIVER_IMPORTS = (
    "import receiver\n"
    "from sume.core import aws\n"
    "from sume.receiving.settings import ReceiverSettings\n"
    "from sume.receiving.compose import build_signing_secrets\n"
    "from sume.store.compose import build_intake\n"
    "from bench.secretstub import answer_secrets\n"
)
RECEIVER_BUILDS = (
    "settings = ReceiverSettings.from_env()\n"
    "build_intake(settings)\n"
    "secrets = build_signing_secrets(settings)\n"
    "answer_secrets(aws.client('secretsmanager'))\n"
    "assert secrets.current() == (b'whsec_bench_cold_start',)"
)
# What each measured variant runs in the fresh process.
VARIANTS: dict[str, str] = {
    "import boto3": "import boto3",
    FLOOR: FLOOR_IMPORTS + FLOOR_BUILDS,
    "Powertools Logger, Metrics, Tracer": (
        "from aws_lambda_powertools import Logger, Metrics, Tracer\n"
        "Logger(service='b'); Metrics(namespace='b', service='b'); Tracer(service='b')"
    ),
    "... + parameters (SecretsProvider)": (
        "from aws_lambda_powertools import Logger, Metrics, Tracer\n"
        "from aws_lambda_powertools.utilities.parameters import SecretsProvider\n"
        "Logger(service='b'); Metrics(namespace='b', service='b'); Tracer(service='b')"
    ),
    "import receiver": "import receiver",
    # The receiver builds its settings, clients and secret provider on the
    # first delivery, and reads the secret: a cold start pays all of it.
    RECEIVER_FIRST_USE: RECEIVER_IMPORTS + RECEIVER_BUILDS,
}
# Under SnapStart the imports are in the snapshot and the first delivery after a
# restore builds the rest (the receiver builds nothing at import): the same
# pair, with the imports before the clock. The receiver's after-restore hooks,
# registered at import with a stand-in for the runtime's ``snapshot_restore_py``,
# run first on the clock, as a restore runs them before the first invocation.
RESTORE_HOOKS = (
    "import types\n"
    "hooks = []\n"
    "sys.modules['snapshot_restore_py'] = types.SimpleNamespace(\n"
    "    register_after_restore=lambda f, *a, **k: hooks.append((f, a, k)))\n"
)
RUN_RESTORE_HOOKS = "assert hooks\nfor f, a, k in hooks: f(*a, **k)\n"
RESTORED_FLOOR = FLOOR_IMPORTS + CLOCK + FLOOR_BUILDS
RESTORED_RECEIVER = RESTORE_HOOKS + RECEIVER_IMPORTS + CLOCK + RUN_RESTORE_HOOKS + RECEIVER_BUILDS


# The target's pair (floor, receiver's first use) runs until the median of
# their paired differences is known to within +/- HALF_WIDTH_MS (a 95 %
# distribution-free interval), so that two runs of the bench agree within
# 2 x HALF_WIDTH_MS; at least MIN_PAIRS, at most MAX_PAIRS.
MIN_PAIRS = 20
MAX_PAIRS = 40
HALF_WIDTH_MS = 5.0
Z_95 = 1.96


def median_interval(values: Sequence[float]) -> tuple[float, float]:
    """A 95 % confidence interval of the median, from order statistics (no distribution assumed)."""
    ordered = sorted(values)
    n = len(ordered)
    spread = Z_95 * math.sqrt(n) / 2
    low = max(0, math.floor(n / 2 - spread) - 1)
    high = min(n - 1, math.ceil(n / 2 + spread))
    return ordered[low], ordered[high]


def quartiles(values: Sequence[float]) -> tuple[float, float]:
    q = statistics.quantiles(values, n=4)
    return q[0], q[2]


@dataclass
class Gap:
    """The target's figure: receiver's first use less the floor, paired run by run."""

    floor_ms: list[float] = field(default_factory=list)
    receiver_ms: list[float] = field(default_factory=list)

    @property
    def differences(self) -> list[float]:
        return [r - f for r, f in zip(self.receiver_ms, self.floor_ms, strict=True)]

    @property
    def median(self) -> float:
        return statistics.median(self.differences)

    @property
    def interval(self) -> tuple[float, float]:
        return median_interval(self.differences)

    def settled(self) -> bool:
        if len(self.floor_ms) < MIN_PAIRS:
            return False
        low, high = self.interval
        return (high - low) / 2 <= HALF_WIDTH_MS


@dataclass
class ColdReport:
    runs: int
    gap: Gap = field(default_factory=Gap)
    restored: Gap = field(default_factory=Gap)
    """The same pair with the imports in a snapshot (SnapStart): what a restore leaves."""
    ms: dict[str, list[float]] = field(default_factory=dict)
    """CPU ms per run."""
    wall_ms: dict[str, list[float]] = field(default_factory=dict)
    tracer_off_ms: dict[str, list[float]] = field(default_factory=dict)
    heaviest: list[tuple[str, float]] = field(default_factory=list)
    """Top-level packages by cumulative import time (ms) of ``import receiver``."""
    heaviest_modules: list[tuple[str, float, float]] = field(default_factory=list)
    """Modules by own import time: (name, self ms, cumulative ms)."""

    def median(self, name: str) -> float:
        return statistics.median(self.ms[name])

    def median_wall(self, name: str) -> float:
        return statistics.median(self.wall_ms[name])


def _env(tracer: bool = True) -> dict[str, str]:
    env = h.lambda_runtime_env()
    if not tracer:
        env["POWERTOOLS_TRACE_DISABLED"] = "true"
    return env


def _once(code: str, env: dict[str, str]) -> tuple[float, float]:
    cpu, wall = h.last_json(h.python("-c", PROBE, code, env=env), "a cold-start probe")
    return float(cpu), float(wall)


def variants() -> dict[str, str]:
    found = dict(VARIANTS)
    for module in HANDLERS:
        if module != "receiver":
            found[f"import {module}"] = f"import {module}"
    return found


def importtime(
    code: str, env: dict[str, str]
) -> tuple[list[tuple[str, float]], list[tuple[str, float, float]]]:
    """``python -X importtime``: totals per top-level package, and the heaviest modules."""
    out = h.python("-X", "importtime", "-c", code, env=env)
    out.check_returncode()
    per_package: dict[str, float] = {}
    modules: list[tuple[str, float, float]] = []
    for line in out.stderr.splitlines():
        if not line.startswith("import time:") or "imported package" in line:
            continue
        self_us, cumulative_us, name = (part.strip() for part in line[12:].split("|"))
        module = name.strip()
        modules.append((module, int(self_us) / 1000, int(cumulative_us) / 1000))
        top = module.split(".")[0]
        per_package[top] = per_package.get(top, 0.0) + int(self_us) / 1000
    packages = sorted(per_package.items(), key=lambda kv: kv[1], reverse=True)
    modules.sort(key=lambda m: m[1], reverse=True)
    return packages, modules


def _many(codes: list[str], env: dict[str, str]) -> list[tuple[float, float]]:
    """Two processes at a time: CPU time is each one's own, and the two of a pair meet
    the same moment of the machine (their wall time, shown aside, does not)."""
    with ThreadPoolExecutor(2) as pool:
        return list(pool.map(lambda code: _once(code, env), codes))


def measure(runs: int) -> ColdReport:
    report = ColdReport(runs)
    on, off = _env(), _env(tracer=False)
    chosen = variants()
    _many([*chosen.values(), RESTORED_FLOOR, RESTORED_RECEIVER], on)  # the bytecode cache
    again = ("import receiver", RECEIVER_FIRST_USE)
    for _ in range(runs):
        # Interleaved, so a noisy moment hits every variant alike.
        for name, (cpu, wall) in zip(chosen, _many(list(chosen.values()), on), strict=True):
            report.ms.setdefault(name, []).append(cpu)
            report.wall_ms.setdefault(name, []).append(wall)
        for name, (cpu, _) in zip(again, _many([chosen[n] for n in again], off), strict=True):
            report.tracer_off_ms.setdefault(name, []).append(cpu)
    # The judged pair runs until its median is known; the other, MIN_PAIRS.
    judged = report.restored if RECEIVER_SNAPSTART else report.gap
    for gap, floor, ours in (
        (report.gap, chosen[FLOOR], chosen[RECEIVER_FIRST_USE]),
        (report.restored, RESTORED_FLOOR, RESTORED_RECEIVER),
    ):
        while len(gap.floor_ms) < MIN_PAIRS or (gap is judged and not gap.settled()):
            if len(gap.floor_ms) >= MAX_PAIRS:
                break
            (floor_ms, _), (ours_ms, _) = _many([floor, ours], on)
            gap.floor_ms.append(floor_ms)
            gap.receiver_ms.append(ours_ms)
    packages, modules = importtime("import receiver", on)
    report.heaviest = packages[:10]
    report.heaviest_modules = modules[:12]
    return report


IMPORT_MARGIN_MS = 30.0


def render_gap(gap: Gap, what: str) -> str:
    diffs, (low, high), (q1, q3) = gap.differences, gap.interval, quartiles(gap.differences)
    return (
        f"{what}, {len(diffs)} fresh-process pairs: median **{gap.median:+.0f} ms CPU**, "
        f"95 % interval {low:+.0f} to {high:+.0f}, quartiles {q1:+.0f} / {q3:+.0f}, range "
        f"{min(diffs):+.0f} to {max(diffs):+.0f}; floor median "
        f"{statistics.median(gap.floor_ms):.0f} ms, receiver median "
        f"{statistics.median(gap.receiver_ms):.0f} ms."
    )


def section(ctx: h.Context) -> ColdReport:
    report = measure(ctx.pick(3, 1))
    render(report, ctx.targets)
    return report


def render(report: ColdReport, targets: h.Targets) -> None:
    print(
        f"## 3. Cold start against an honest floor (fresh process, Lambda env, Tracer on; "
        f"CPU ms, median of {report.runs} runs)\n"
    )
    floor = report.ms[FLOOR]
    rows = [
        (
            name,
            f"{report.median(name):.0f}",
            f"{report.median_wall(name):.0f}",
            f"{h.paired_difference(v, floor):+.0f}",
        )
        for name, v in report.ms.items()
    ]
    print(h.table(["import", "CPU ms", "wall ms", "vs floor (CPU)"], rows))
    print("\nWith the Tracer off (`POWERTOOLS_TRACE_DISABLED=true`):")
    for name, v in report.tracer_off_ms.items():
        print(f"- {name}: {statistics.median(v):.0f} CPU ms, {h.paired_difference(v, floor):+.0f}")
    print("\nHeaviest imports of `import receiver` (`-X importtime`, own ms per package):\n")
    print(h.table(["package", "ms"], [(p, f"{ms:.0f}") for p, ms in report.heaviest]))
    print("\nHeaviest single modules:\n")
    modules = [(m, f"{a:.0f}", f"{b:.0f}") for m, a, b in report.heaviest_modules]
    print(h.table(["module", "own ms", "cumulative ms"], modules))
    print(f"\n{render_gap(report.gap, 'Full init (import + first use) less the floor')}\n")
    print(f"{render_gap(report.restored, 'As SnapStart restores it (imports in the snapshot)')}\n")
    month, per_million = cost.snapstart(RECEIVER_MEMORY_MB)
    print(
        f"SnapStart on the receiver ({'enabled' if RECEIVER_SNAPSTART else 'not enabled'}) at "
        f"{RECEIVER_MEMORY_MB} MB: {month:.2f} USD a month for the cached snapshot, "
        f"{per_million:.2f} USD per million restores (one per new container). The restore "
        "itself runs outside the process: AWS reports it as `Restore Duration`.\n"
    )
    off = h.paired_difference(report.tracer_off_ms[RECEIVER_FIRST_USE], floor)
    low, high = report.gap.interval
    full_init = (
        f"{report.gap.median:+.0f} ms CPU ({low:+.0f} to {high:+.0f}, "
        f"{len(report.gap.floor_ms)} pairs) with the Tracer ({off:+.0f} ms without)"
    )
    judged, what, value = report.gap, "import + first use", full_init
    if RECEIVER_SNAPSTART:
        # As deployed a new container is restored, not initialised: the full init runs
        # once per deploy, when the version is published.
        judged, what = report.restored, "as deployed: restored by SnapStart"
        rlow, rhigh = judged.interval
        value = (
            f"{judged.median:+.0f} ms CPU restored ({rlow:+.0f} to {rhigh:+.0f}, "
            f"{len(judged.floor_ms)} pairs); full init {full_init}, run once per deploy"
        )
    targets.add(
        f"receiver cold start within {IMPORT_MARGIN_MS:.0f} ms of floor ({what})",
        value,
        judged.median <= IMPORT_MARGIN_MS,
    )
