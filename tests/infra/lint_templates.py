"""cfn-lint over the templates named on stdin's first line, findings as JSON.

Run as a subprocess that the infra tests start before the synth finishes:
importing cfn-lint (its schemas) takes seconds, and it overlaps the synth.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from cfnlint.api import ManualArgs
from cfnlint.config import ConfigMixIn
from cfnlint.decode.decode import decode_str
from cfnlint.runner import Runner


def main() -> None:
    # One runner for every template, as `cfn-lint a.json b.json` does: cfnlint.api.lint
    # would load its rules again for each (0.4 s a template).
    runner = Runner(ConfigMixIn(**ManualArgs(regions=["us-east-1"])))
    findings = []
    for name in sys.stdin.readline().split():
        template, errors = decode_str(Path(name).read_text(encoding="utf-8"))
        matches = errors or (list(runner.validate_template(template)) if template else [])
        for match in matches:
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
