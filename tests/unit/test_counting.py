"""Every count the functions publish goes through ``sume.core.observability.count``:
the unit and the metrics object are written once, where the alarms' names are."""

import ast
from pathlib import Path

FUNCTIONS = Path(__file__).resolve().parents[2] / "functions"
HOME = FUNCTIONS / "sume" / "core" / "observability.py"


def _counts_spelled_out(path: Path) -> list[int]:
    lines = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        if node.func.attr != "add_metric":
            continue
        units = [k.value for k in node.keywords if k.arg == "unit"]
        if any(isinstance(u, ast.Constant) and u.value == "Count" for u in units):
            lines.append(node.lineno)
    return lines


def test_no_function_spells_out_a_count():
    sources = sorted(FUNCTIONS.rglob("*.py"))
    assert HOME in sources
    assert _counts_spelled_out(HOME), "the helper itself is found"
    found = {
        str(path.relative_to(FUNCTIONS)): lines
        for path in sources
        if path != HOME and (lines := _counts_spelled_out(path))
    }
    assert found == {}, "use sume.core.observability.count"
