"""Loading the unit tier imports no moto (the conftest's fixture checks the tests' bodies)."""

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]

SCRIPT = """
import importlib, sys
for name in sys.argv[1:]:
    importlib.import_module(name)
print(sorted({n.partition(".")[0] for n in sys.modules} & {"moto", "responses", "werkzeug"}))
"""


def test_the_unit_tier_loads_without_moto():
    modules = ["tests.conftest", "tests.unit.conftest"]
    modules += [f"tests.unit.{path.stem}" for path in sorted(HERE.glob("test_*.py"))]
    assert len(modules) > 20
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, *modules],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert out.stdout.strip() == "[]"
