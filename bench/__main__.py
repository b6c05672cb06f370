"""``python -m bench`` (``make bench``): every section, one module each. Stdout is the
markdown report, stderr a line naming each section as it starts. A section that fails is
a missed target naming it, and the others still run."""

from __future__ import annotations

import argparse
import sys
import time
import traceback
import warnings
from collections.abc import Callable
from typing import Any

from bench.harness import forbid_network, use_fake_aws

use_fake_aws()
forbid_network()

from bench import (  # noqa: E402
    artifacts,
    calls,
    capacity,
    cold,
    cpu,
    delivery_cost,
    idle,
    indexes,
    jobs,
    throughput,
)
from bench.harness import Context, MiB, machine, table, verdict  # noqa: E402

# In the order they run and print.
SECTIONS: dict[str, tuple[str, Callable[[Context], Any]]] = {
    "calls": ("1. AWS calls per delivery, per job, per round (moto in-process)", calls.section),
    "cpu": ("2. receiver CPU per delivery (Stubber) and its breakdown", cpu.section),
    "cold": ("3. cold start against the floor (fresh processes)", cold.section),
    "throughput": ("4. bursts on the local stack", throughput.section),
    "cost": ("5. cost per million deliveries", delivery_cost.section),
    "artifacts": ("6. artifact copies (fresh processes)", artifacts.section),
    "poller": ("7. poller capacity (a round in 1, 4 and 16 processes)", capacity.section),
    "indexes": ("8. index writes per job (moto in-process)", indexes.section),
    "jobs": ("9. cost per million jobs, per path (moto in-process)", jobs.section),
    "idle": ("10. the idle local stack's CPU (make run, left alone)", idle.section),
}
# Sections whose figures another prices: run first when it is chosen.
NEEDS = {"cost": delivery_cost.NEEDS}


def chosen(parser: argparse.ArgumentParser, only: str, skip: str) -> list[str]:
    named = {s for s in f"{only},{skip}".split(",") if s}
    if unknown := named - set(SECTIONS):
        parser.error(f"unknown sections {sorted(unknown)}; known: {','.join(SECTIONS)}")
    wanted = set(filter(None, only.split(","))) or set(SECTIONS)
    wanted -= set(skip.split(","))
    wanted |= {need for name in wanted for need in NEEDS.get(name, ())}
    return [name for name in SECTIONS if name in wanted]


def parser() -> argparse.ArgumentParser:
    found = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    found.add_argument("--quick", action="store_true", help="fewer rounds, smaller sizes")
    found.add_argument("--only", default="", help=f"comma-separated: {','.join(SECTIONS)}")
    found.add_argument("--skip", default="", help="comma-separated sections to leave out")
    found.add_argument("--artifact-mib", type=int, help="artifact size (default 128, quick 32)")
    return found


def run(name: str, ctx: Context, started: float) -> None:
    title, section = SECTIONS[name]
    print(f"[bench +{time.time() - started:.0f} s] {title}", file=sys.stderr, flush=True)
    try:
        ctx.reports[name] = section(ctx)
    except Exception as error:
        traceback.print_exc(file=sys.stderr)
        print(f"\n**Section {name} stopped before its end**: {error!r}\n")
        ctx.targets.add(f"section {name} runs to its end", repr(error)[:200], False)


def main(argv: list[str] | None = None) -> int:
    p = parser()
    args = p.parse_args(argv)
    names = chosen(p, args.only, args.skip)
    warnings.filterwarnings("ignore", message="No application metrics to publish")
    ctx = Context(args.quick, artifact_bytes=args.artifact_mib * MiB if args.artifact_mib else None)
    started = time.time()
    print(f"# make bench{' --quick' if args.quick else ''}\n\nMachine: {machine()}\n")
    for name in names:
        if all(need in ctx.reports for need in NEEDS.get(name, ())):
            run(name, ctx, started)
    rows = ctx.targets.rows
    print("## Targets\n")
    print(table(["target", "measured", ""], [(t, m, verdict(met)) for t, m, met in rows]))
    met = sum(1 for *_, m in rows if m)
    print(f"\n{met} of {len(rows)} targets met in {time.time() - started:.0f} s.")
    if missed := [t for t, _, m in rows if m is False]:
        print("Missed: " + "; ".join(missed) + ".")
    return 1 if any(t.startswith("section ") for t, _, m in rows if m is False) else 0


if __name__ == "__main__":
    sys.exit(main())
