"""CloudWatch metric math, for one period, over a synthesized alarm's queries: what the
alarm would compute from given data points, so a test can say when it fires.

The subset the stack's alarms use: ``IF``, ``FILL``, ``AND``/``OR``, comparisons and
arithmetic. A metric without a data point is ``None``; as in CloudWatch, an
expression over it has no data point either, unless ``FILL`` gives it one (and an
alarm's ``TreatMissingData`` then decides).
"""

from __future__ import annotations

import ast
import operator
import re
from collections.abc import Callable, Mapping
from typing import Any

Value = float | None

_ARITHMETIC: dict[type[ast.operator], Callable[[float, float], float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
}
_COMPARISONS: dict[type[ast.cmpop], Callable[[float, float], bool]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
}


def evaluate(alarm: Mapping[str, Any], data: Mapping[str, Value]) -> Value:
    """The value of an alarm's returned expression, ``data`` giving each metric query's
    data point by the query's id (a missing id: no data point)."""
    queries = {q["Id"]: q for q in alarm["Metrics"]}
    (returned,) = [q for q in alarm["Metrics"] if q.get("ReturnData", True)]

    def value(query_id: str) -> Value:
        query = queries[query_id]
        if "MetricStat" in query:
            return data.get(query_id)
        return expression(query["Expression"])

    def expression(text: str) -> Value:
        python = re.sub(r"\bAND\b", "and", re.sub(r"\bOR\b", "or", text))
        return node(ast.parse(python, mode="eval").body)

    def node(tree: ast.expr) -> Value:  # noqa: PLR0911 - one answer per kind of node
        if isinstance(tree, ast.Constant) and isinstance(tree.value, int | float):
            return float(tree.value)
        if isinstance(tree, ast.Name):
            return value(tree.id)
        if isinstance(tree, ast.Call) and isinstance(tree.func, ast.Name):
            args = tree.args
            if tree.func.id == "FILL":
                filled = node(args[0])
                return node(args[1]) if filled is None else filled
            if tree.func.id == "IF":
                condition = node(args[0])
                if condition is None:
                    return None
                return node(args[1]) if condition else node(args[2])
        if isinstance(tree, ast.BoolOp):
            values = [node(v) for v in tree.values]
            if any(v is None for v in values):
                return None
            combine = all if isinstance(tree.op, ast.And) else any
            return float(combine(values))
        if isinstance(tree, ast.BinOp) and type(tree.op) in _ARITHMETIC:
            left, right = node(tree.left), node(tree.right)
            if left is None or right is None:
                return None
            return _ARITHMETIC[type(tree.op)](left, right)
        if isinstance(tree, ast.Compare) and len(tree.ops) == 1:
            left, right = node(tree.left), node(tree.comparators[0])
            if left is None or right is None:
                return None
            return float(_COMPARISONS[type(tree.ops[0])](left, right))
        raise ValueError(f"not in the metric math this evaluates: {ast.dump(tree)}")

    return expression(returned["Expression"])


def fires(alarm: Mapping[str, Any], data: Mapping[str, Value]) -> bool:
    """Whether the alarm is in ALARM after a period with these data points (one
    evaluation period, ``>=`` its threshold, missing data not breaching)."""
    assert alarm["EvaluationPeriods"] == 1
    assert alarm["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    assert alarm["TreatMissingData"] == "notBreaching"
    result = evaluate(alarm, data)
    return result is not None and result >= alarm["Threshold"]
