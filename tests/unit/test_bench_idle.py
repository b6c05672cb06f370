"""The idle bench's reading of a process tree's CPU from /proc."""

from __future__ import annotations

import os
import subprocess
import sys

from bench.idle import tree_cpu_seconds

# The child burns this much CPU (by its own clock, however long that takes), then waits.
BURN = 0.3
CHILD = (
    "import sys, time\n"
    f"while time.process_time() < {BURN}: pass\n"
    "print('burnt', flush=True)\n"
    "sys.stdin.read()\n"
)


def test_the_tree_counts_a_child_s_cpu_with_its_parent_s() -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None and child.stdout.readline() == "burnt\n"
        own = os.times()
        tree = tree_cpu_seconds(os.getpid())
        assert tree >= own.user + own.system + BURN - 0.05  # /proc counts in clock ticks
        assert tree_cpu_seconds(child.pid) >= BURN - 0.05
    finally:
        child.communicate("")
