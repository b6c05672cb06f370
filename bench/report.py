"""Markdown tables, the targets each section adds to, and the machine the figures came from."""

from __future__ import annotations

import os
import platform
import statistics
from collections.abc import Sequence
from dataclasses import dataclass


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine() -> str:
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "?"
    return (
        f"{os.cpu_count()} CPUs (nproc), {cpu_model()}, Python {platform.python_version()}, "
        f"{platform.system()} {platform.machine()}, load average at start {load}"
    )


def paired_ratio(numerators: Sequence[float], denominators: Sequence[float]) -> float:
    """Median of per-round ratios: a round's noise hits both sides of its ratio."""
    return statistics.median(n / d for n, d in zip(numerators, denominators, strict=True))


def paired_difference(left: Sequence[float], right: Sequence[float]) -> float:
    return statistics.median(a - b for a, b in zip(left, right, strict=True))


def verdict(met: bool | None) -> str:
    return "-" if met is None else ("met" if met else "**MISSED**")


@dataclass
class Targets:
    rows: list[tuple[str, str, bool | None]]

    def add(self, target: str, measured: str, met: bool | None) -> None:
        self.rows.append((target, measured, met))
