"""The templates a synth wrote, as its cloud assembly's manifest lists them.

The output folder keeps every template an earlier synth wrote (a two-region synth
leaves `<stack>-<region>` files behind a single-region one, and the other way
round), so its listing says nothing about the synth that just ran: the manifest does.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

STACK_ARTIFACT = "aws:cloudformation:stack"


def templates(outdir: Path) -> list[Path]:
    manifest = json.loads((outdir / "manifest.json").read_text(encoding="utf-8"))
    return [
        outdir / artifact["properties"]["templateFile"]
        for artifact in manifest["artifacts"].values()
        if artifact["type"] == STACK_ARTIFACT
    ]


def main(argv: list[str]) -> None:
    outdir = Path(argv[0])
    written = " ".join(str(path) for path in templates(outdir))
    print(f"template: {written} (cloud assembly in {outdir}/)")


if __name__ == "__main__":
    main(sys.argv[1:])
