"""The idle local stack's CPU: ``python -m devstack`` started as ``make run`` starts it
(a shell's environment, no POWERTOOLS_* set), left alone after its banner, and the CPU
its whole process tree used over that stretch, read from /proc.

Idle, the event sources wait in long polls (10 s) and the poller's timer asks
whether anything is due; a figure well above the target means a loop is back.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from bench.harness import Context, Targets

TARGET_PERCENT = 5.0
STRETCH_SECONDS = 30.0
QUICK_STRETCH_SECONDS = 10.0
# After the banner: the first long polls and timer ticks start.
SETTLE_SECONDS = 3.0
BANNER_END = "Ctrl-C stops."
PROC = Path("/proc")


@dataclass(frozen=True)
class Idle:
    cpu_seconds: float
    seconds: float
    lines: int
    """Lines the stack printed during the stretch (none is expected)."""

    @property
    def percent(self) -> float:
        return 100 * self.cpu_seconds / self.seconds


def stretch(quick: bool) -> float:
    return QUICK_STRETCH_SECONDS if quick else STRETCH_SECONDS


def tree_cpu_seconds(root: int) -> float:
    """User + system CPU of ``root`` and every live descendant, from /proc."""
    tick = os.sysconf("SC_CLK_TCK")
    parents: dict[int, int] = {}
    used: dict[int, float] = {}
    for stat in PROC.glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
        except OSError:
            continue  # ended meanwhile
        pid = int(stat.parent.name)
        parents[pid] = int(fields[1])
        used[pid] = (int(fields[11]) + int(fields[12])) / tick
    tree, grew = {root}, True
    while grew:
        children = {pid for pid, parent in parents.items() if parent in tree} - tree
        tree |= children
        grew = bool(children)
    return sum(used.get(pid, 0.0) for pid in tree)


def measure(seconds: float) -> Idle | None:
    """None where there is no /proc to read."""
    if not (PROC / str(os.getpid()) / "stat").exists():
        return None
    shell = {k: os.environ[k] for k in ("PATH", "HOME", "LANG") if k in os.environ}
    stack = subprocess.Popen(
        [sys.executable, "-m", "devstack", "--port", "0", "--moto-port", "0"],
        env={**shell, "AWS_CONFIG_FILE": os.devnull, "AWS_SHARED_CREDENTIALS_FILE": os.devnull},
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    printed: list[str] = []
    try:
        assert stack.stdout is not None
        for line in stack.stdout:
            if line.startswith(BANNER_END):
                break
        # Read as printed: a full pipe would stall a chatty stack and hide its cost.
        reader = threading.Thread(target=printed.extend, args=(stack.stdout,), daemon=True)
        reader.start()
        time.sleep(SETTLE_SECONDS)
        cpu, started = tree_cpu_seconds(stack.pid), time.monotonic()
        time.sleep(seconds)
        cpu, elapsed = tree_cpu_seconds(stack.pid) - cpu, time.monotonic() - started
    finally:
        stack.terminate()
        stack.wait(60)
    reader.join(60)
    return Idle(cpu, elapsed, len([line for line in printed if not line.startswith("stop")]))


def render(idle: Idle | None, targets: Targets) -> None:
    print("## 10. The idle local stack (`make run` left alone: its whole process tree)\n")
    target = f"idle local stack <= {TARGET_PERCENT:g} % of one core"
    if idle is None:
        print("Not measured: no /proc on this machine.\n")
        targets.add(target, "not measured", None)
        return
    measured = f"{idle.percent:.1f} %"
    print(
        f"{idle.cpu_seconds:.2f} CPU-s over {idle.seconds:.0f} s idle: {measured} of one core; "
        f"{idle.lines} line(s) printed meanwhile.\n"
    )
    targets.add(target, measured, idle.percent <= TARGET_PERCENT and idle.lines == 0)


def section(ctx: Context) -> Idle | None:
    found = measure(stretch(ctx.quick))
    render(found, ctx.targets)
    return found
