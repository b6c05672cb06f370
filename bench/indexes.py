"""Section 8: what each DynamoDB write of a job's life costs each index of the table, on
``bench.stack``'s paths and by its meter; the due-work index as it was (``ALL``, not
deployed) is priced on the same writes beside the deployed ones.
"""

from __future__ import annotations

from bench import cost
from bench import harness as h
from bench.stack import COMPLETED, DEPLOYED_INDEXES, Usage, paths
from sume.core.names import DUE_INDEX, DUE_INDEX_BEFORE, REPORT_INDEX
from sume.store.sizing import item_size


def by_writer(usage: Usage) -> dict[str, int]:
    """Write units of the report index per writer (function, registration, ops CLI)."""
    units = usage.index_units
    return {writer: n for (writer, name), n in units.items() if name == REPORT_INDEX and writer}


def section(ctx: h.Context) -> None:
    runs, _ = paths()
    print(
        "## 8. Index writes per job (the real handlers on moto in-process; every write's "
        "item read before and after, each index's entry compared)\n"
    )
    rows, names = [], [*DEPLOYED_INDEXES, DUE_INDEX_BEFORE]
    for run in runs:
        cells = ["{} ({} WRU)".format(*run.usage.index(n)) for n in names]
        writers = ", ".join(f"{w} {n}" for w, n in by_writer(run.usage).items())
        rows.append((run.label, run.usage.writes, *cells, writers, run.ending))
    headers = [f"`{n}` writes (WRU)" for n in DEPLOYED_INDEXES]
    headers.append(f"`{DUE_INDEX_BEFORE}` writes (WRU) as it was (ALL), not deployed")
    writers = f"`{REPORT_INDEX}` WRU by writer"
    print(h.table(["job's life", "table writes", *headers, writers, "ending"], rows))
    completed = next(r.usage for r in runs if r.label == COMPLETED).index(DUE_INDEX)[1]
    ctx.targets.add(
        f"`{DUE_INDEX}`: at most 3 write units for a job completed with 2 artifacts",
        str(completed),
        completed <= 3,
    )
    unended = [run.label for run in runs if not run.ended]
    ctx.targets.add(
        "every job path runs to its ending (finished, or lost and announced; nothing due)",
        f"{len(runs) - len(unended)} of {len(runs)}"
        + (f"; not: {', '.join(unended)}" if unended else ""),
        not unended,
    )
    per_job = max(run.usage.index(REPORT_INDEX)[1] for run in runs)
    receiver = sum(by_writer(run.usage).get("receiver", 0) for run in runs)
    keys = {"report_bucket": {"S": "2026-12-01#07"}, "report_at": {"N": "1764590000"}}
    print(
        f"\nThe report index's keys add {item_size(keys)} B to the item; at most {per_job} write "
        f"unit per job goes to `{REPORT_INDEX}` (${per_job * cost.DDB_WRU_PER_M:.3f} per million "
        f"jobs), the receiver's writes make {receiver}.\n"
    )
    ctx.targets.add(
        f"receiver: 0 writes of the `{REPORT_INDEX}` index", str(receiver), receiver == 0
    )
    ctx.targets.add(f"`{REPORT_INDEX}`: at most 1 write unit per job", str(per_job), per_job <= 1)
