"""The single-region templates' digest, which the multi-region option must leave alone.

``python -m tests.infra.template_digest`` synthesizes the dev and prod stages
(as the infra tests do) and writes their digests to ``single_region.json``:
run it when a change to the single-region stack is meant, and commit the file.
Asset hashes (the functions' code, the schemas) are left out: they change
with every code change, not with the stack; so is the hash CDK puts in the
receiver's published version's logical id, which hashes the function's code too.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
import tempfile
from pathlib import Path
from typing import Final

from infra import spec

DIGESTS: Final = Path(__file__).with_name("single_region.json")
_ASSET_HASH = re.compile(r"[0-9a-f]{64}")
_VERSION_HASH = re.compile(r"(CurrentVersion[0-9A-F]{8})[0-9a-f]{32}")


def digest(template_text: str) -> str:
    text = _VERSION_HASH.sub(r"\1<code>", _ASSET_HASH.sub("<asset>", template_text))
    return hashlib.sha256(text.encode()).hexdigest()


def digests(outdir: Path, stages: tuple[str, ...]) -> dict[str, str]:
    return {
        stage: digest((outdir / f"{spec.stack_name(stage)}.template.json").read_text())
        for stage in stages
    }


def main() -> None:
    from tests.infra.synth_stages import main as synth

    with tempfile.TemporaryDirectory() as outdir:
        synth(outdir)
        found = digests(Path(outdir), ("dev", "prod"))
    DIGESTS.write_text(json.dumps(found, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    sys.stdout.write(f"wrote {DIGESTS}\n")


if __name__ == "__main__":
    main()
