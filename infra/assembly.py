"""The templates a synth wrote, as its cloud assembly's manifest lists them, and
what each stage takes (its capacity outputs, infra/capacity.py).

The output folder keeps every template an earlier synth wrote (a two-region synth
leaves `<stack>-<region>` files behind a single-region one, and the other way
round), so its listing says nothing about the synth that just ran: the manifest does.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from infra.spec import OUTPUT_CAPACITY, OUTPUT_CAPACITY_BOUND_BY

STACK_ARTIFACT = "aws:cloudformation:stack"


def templates(outdir: Path) -> list[Path]:
    manifest = json.loads((outdir / "manifest.json").read_text(encoding="utf-8"))
    return [
        outdir / artifact["properties"]["templateFile"]
        for artifact in manifest["artifacts"].values()
        if artifact["type"] == STACK_ARTIFACT
    ]


def capacity_line(template: Path) -> str | None:
    """``capacity: <stack>: N Sume jobs/s ...; binds first: ...`` from its outputs."""
    if not template.is_file():
        return None
    outputs = json.loads(template.read_text(encoding="utf-8")).get("Outputs", {})
    jobs, bound = outputs.get(OUTPUT_CAPACITY), outputs.get(OUTPUT_CAPACITY_BOUND_BY)
    if not jobs or not bound:
        return None
    stack = template.name.removesuffix(".template.json")
    description = jobs.get("Description", "")
    requests = description[description.find("(") :] if "(" in description else ""
    return (
        f"capacity: {stack} takes {jobs['Value']} Sume jobs/s at the worst case {requests}; "
        f"binds first: {bound['Value']}"
    ).replace("  ", " ")


def main(argv: list[str]) -> None:
    outdir = Path(argv[0])
    written = templates(outdir)
    print(f"template: {' '.join(str(path) for path in written)} (cloud assembly in {outdir}/)")
    for template in written:
        if line := capacity_line(template):
            print(line)


if __name__ == "__main__":
    main(sys.argv[1:])
