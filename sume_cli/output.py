"""What the CLI writes: lines, tables and JSON on stdout, notes on stderr, all terminal-safe.

Much of what the CLI shows comes from outside (job ids, metadata, error texts,
an endpoint's answer). A control character in it could move the cursor, erase
lines or retitle the window, and a bidirectional override could reorder what is
read, so every character of that kind leaves here as its ``\\uXXXX`` escape:
visible in a table, and the same string again in JSON.
"""

from __future__ import annotations

import argparse
import re
import sys
from typing import Any

from sume_cli.story import exact_json

# --output: for people, or one JSON document for scripts.
JSON, TABLE = "json", "table"

# C0 and C1 controls and DEL (the line break is the CLI's own), the zero-width
# and bidirectional formatting characters, and the Unicode line separators.
_UNSAFE = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2066-\u2069\ufeff]")


def terminal_safe(text: str) -> str:
    """``text`` with each character that could drive a terminal written as ``\\uXXXX``."""
    return _UNSAFE.sub(lambda found: f"\\u{ord(found[0]):04x}", text)


def out(text: str = "") -> None:
    print(terminal_safe(text), file=sys.stdout)


def note(text: str) -> None:
    print(terminal_safe(text), file=sys.stderr)


def dump(value: Any) -> None:
    out(exact_json(value, default=str, indent=2, ensure_ascii=False, sort_keys=True))


def as_json_output(args: argparse.Namespace) -> bool:
    return bool(args.output == JSON)


def table(rows: list[list[str]], header: list[str]) -> None:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        out("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
