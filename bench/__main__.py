"""``python -m bench`` (``make bench``): every measurement, side by side.

Progress goes to stderr, section by section, so stdout is the markdown report.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from dataclasses import dataclass

from bench.env import forbid_network, use_fake_aws

use_fake_aws()
forbid_network()

from bench import (  # noqa: E402
    artifacts,
    calls,
    capacity,
    coldstart,
    cost_section,
    cpu,
    idle,
    indexes,
    jobcost,
    jobpaths,
    throughput,
)
from bench.report import Targets, machine, table, verdict  # noqa: E402

MiB = 1024 * 1024


@dataclass(frozen=True)
class Size:
    cpu_rounds: int
    cpu_batch: int
    breakdown_rounds: int
    breakdown_batch: int
    import_runs: int
    deliveries: int
    artifact_bytes: int
    artifact_rounds: int
    poller_items: int
    poller_window: float
    """Seconds each poller run of the round may start polls in."""


FULL = Size(9, 200, 7, 150, 5, 150, artifacts.SIZE, 2, capacity.ITEMS, capacity.WINDOW_SECONDS)
QUICK = Size(
    3,
    60,
    3,
    50,
    1,
    30,
    artifacts.QUICK_SIZE,
    1,
    capacity.QUICK_ITEMS,
    capacity.QUICK_WINDOW_SECONDS,
)
SECTIONS = (
    "calls",
    "cpu",
    "cold",
    "throughput",
    "artifacts",
    "poller",
    "indexes",
    "jobs",
    "idle",
)


def progress(started: float, what: str) -> None:
    """Where the bench is, on stderr, so stdout stays the markdown report."""
    print(f"[bench +{time.time() - started:.0f} s] {what}", file=sys.stderr, flush=True)


def _sections(parser: argparse.ArgumentParser, only: str, skip: str) -> set[str]:
    named = {s for s in f"{only},{skip}".split(",") if s}
    if unknown := named - set(SECTIONS):
        parser.error(f"unknown sections {sorted(unknown)}; known: {','.join(SECTIONS)}")
    chosen = set(filter(None, only.split(","))) or set(SECTIONS)
    return chosen - set(skip.split(","))


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument(
        "--quick", action="store_true", help="fewer rounds, smaller artifact, shorter poller runs"
    )
    parser.add_argument("--only", default="", help=f"comma-separated: {','.join(SECTIONS)}")
    parser.add_argument("--skip", default="", help="comma-separated sections to leave out")
    parser.add_argument(
        "--artifact-mib", type=int, default=None, help="artifact size (default 256, --quick 32)"
    )
    parser.add_argument(
        "--profile", action="store_true", help="also print a cProfile of ours on new deliveries"
    )
    return parser


def _summary(targets: Targets, seconds: float) -> None:
    print("## Targets\n")
    print(table(["target", "measured", ""], [(t, m, verdict(met)) for t, m, met in targets.rows]))
    missed = [t for t, _, met in targets.rows if met is False]
    unmeasured = [t for t, _, met in targets.rows if met is None]
    met = sum(1 for _, _, m in targets.rows if m)
    print(f"\n{met} of {len(targets.rows)} targets met in {seconds:.0f} s.")
    if missed:
        print("Missed: " + "; ".join(missed) + ". See docs/bench.md for why.")
    if unmeasured:
        print("Not measurable yet: " + "; ".join(unmeasured) + ".")


# One block per section, in the report's order: long, but read straight down.
def main(argv: list[str] | None = None) -> int:  # noqa: PLR0915
    parser = _parser()
    args = parser.parse_args(argv)
    size = QUICK if args.quick else FULL
    chosen = _sections(parser, args.only, args.skip)
    artifact_bytes = args.artifact_mib * MiB if args.artifact_mib else size.artifact_bytes
    warnings.filterwarnings("ignore", message="No application metrics to publish")
    started = time.time()
    print(f"# make bench{' --quick' if args.quick else ''}\n")
    print(f"Machine: {machine()}\n")
    targets = Targets([])
    cpu_report: cpu.CpuReport | None = None
    parts: dict[str, list[float]] = {}
    # CPU first: nothing else (moto, servers, threads) is loaded or running yet.
    if "cpu" in chosen:
        progress(started, "2. receiver CPU per delivery (Stubber) and its breakdown")
        cpu_report = cpu.measure(size.cpu_rounds, size.cpu_batch)
        parts = cpu.breakdown(size.breakdown_rounds, size.breakdown_batch)
    calls_report: calls.CallsReport | None = None
    if "calls" in chosen:
        progress(started, "1. AWS calls per delivery (moto in-process)")
        calls_report = calls.measure()
        calls.render(calls_report, targets)
    if cpu_report:
        cpu.render(cpu_report, parts, targets)
    if "cold" in chosen:
        progress(started, "3. cold start against the floor (fresh processes)")
        coldstart.render(coldstart.measure(size.import_runs), targets)
    if "throughput" in chosen:
        progress(started, "4. local stack throughput")
        throughput.render(throughput.measure(size.deliveries))
    if calls_report and cpu_report:
        cost_section.render(calls_report, cpu_report)
    if "artifacts" in chosen:
        progress(started, f"6. artifact copies ({artifact_bytes / MiB:.0f} MiB, fresh processes)")
        artifacts.render(artifacts.measure(artifact_bytes, size.artifact_rounds), targets)
    if "poller" in chosen:
        progress(started, "7. poller capacity (a round in 1, 4 and 16 processes)")
        capacity.render(capacity.measure(size.poller_items, size.poller_window), targets)
    if "indexes" in chosen:
        progress(started, "8. index writes per job (moto in-process)")
        indexes.render(indexes.measure(), targets)
    if "jobs" in chosen:
        progress(started, "9. cost per million jobs, per path (moto in-process)")
        runs, empty_round = jobpaths.measure()
        jobcost.render_section(runs, empty_round, targets)
    if "idle" in chosen:
        progress(started, "10. the idle local stack's CPU (make run, left alone)")
        idle.render(idle.measure(idle.stretch(args.quick)), targets)
    if args.profile:
        print("## cProfile: ours, new deliveries (own time)\n\n```")
        print(cpu.profile("ours", "new", size.cpu_batch))
        print("```\n")
    _summary(targets, time.time() - started)
    return 0


if __name__ == "__main__":
    sys.exit(main())
