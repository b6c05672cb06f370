"""The idle bench's reading of a process tree's CPU from /proc, and of the stack's start."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import pytest

from bench import idle
from bench.harness import Context
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


def test_a_stack_that_ends_before_its_banner_stops_the_section(monkeypatch) -> None:
    # An idle figure read off a stack that never started would be a pass for nothing.
    real = subprocess.Popen

    def ends_at_once(_args: Any, **kwargs: Any) -> Any:
        return real([sys.executable, "-c", "print('starting')"], **kwargs)

    monkeypatch.setattr(subprocess, "Popen", ends_at_once)
    with pytest.raises(RuntimeError, match="before its banner"):
        idle.section(Context(quick=True))
