"""cfn-lint over the templates named on stdin's first line, findings as JSON.

Run as a subprocess that the infra tests start before the synth finishes:
importing cfn-lint (its schemas) takes seconds, and it overlaps the synth.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from cfnlint.api import lint


def main() -> None:
    from cfnlint.api import ManualArgs

    config = ManualArgs(regions=["us-east-1"])
    findings = []
    for name in sys.stdin.readline().split():
        for match in lint(Path(name).read_text(encoding="utf-8"), config=config):
            findings.append(
                {
                    "file": name,
                    "rule": match.rule.id,
                    "message": match.message,
                    "path": [str(p) for p in match.path],
                }
            )
    json.dump(findings, sys.stdout)


if __name__ == "__main__":
    main()
