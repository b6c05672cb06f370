"""Section 10, the idle local stack's CPU: ``python -m devstack`` started as ``make run`` starts
it (a shell's environment, no POWERTOOLS_* set) and left alone after its banner. Idle, the
event sources wait in long polls (10 s) and the poller's timer asks whether anything is due; a
figure well above the target means a loop is back.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from bench.harness import Context

TARGET_PERCENT = 5.0
SETTLE_SECONDS = 3.0  # after the banner: the first long polls and timer ticks start
BANNER_END = "Ctrl-C stops."
PROC = Path("/proc")


def tree_cpu_seconds(root: int) -> float:
    """User + system CPU of ``root`` and every live descendant, from /proc."""
    ticks: dict[int, tuple[int, int]] = {}  # pid: (parent, CPU clock ticks)
    for stat in PROC.glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):  # ended meanwhile
            fields = stat.read_text().rpartition(")")[2].split()
            ticks[int(stat.parent.name)] = (int(fields[1]), int(fields[11]) + int(fields[12]))
    tree = {root}
    while children := {pid for pid, (parent, _) in ticks.items() if parent in tree} - tree:
        tree |= children
    return sum(ticks[pid][1] for pid in tree if pid in ticks) / os.sysconf("SC_CLK_TCK")


def section(ctx: Context) -> None:
    print("## 10. The idle local stack (`make run` left alone: its whole process tree)\n")
    target = f"idle local stack <= {TARGET_PERCENT:g} % of one core"
    if not (PROC / "self" / "stat").exists():
        print("Not measured: no /proc on this machine.\n")
        ctx.targets.add(target, "not measured", None)
        return
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
        if not any(line.startswith(BANNER_END) for line in stack.stdout):
            raise RuntimeError(f"the local stack ended (code {stack.wait()}) before its banner")
        # Read as printed: a full pipe would stall a chatty stack and hide its cost.
        reader = threading.Thread(target=printed.extend, args=(stack.stdout,), daemon=True)
        reader.start()
        time.sleep(SETTLE_SECONDS)
        cpu, started = tree_cpu_seconds(stack.pid), time.monotonic()
        time.sleep(ctx.pick(30.0, 10.0))
        cpu, seconds = tree_cpu_seconds(stack.pid) - cpu, time.monotonic() - started
    finally:
        stack.terminate()
        stack.wait(60)
    reader.join(60)
    lines = len([line for line in printed if not line.startswith("stop")])
    percent = 100 * cpu / seconds
    print(
        f"{cpu:.2f} CPU-s over {seconds:.0f} s idle: {percent:.1f} % of one core; "
        f"{lines} line(s) printed meanwhile.\n"
    )
    ctx.targets.add(target, f"{percent:.1f} %", percent <= TARGET_PERCENT and lines == 0)
