"""Benchmark the scan of a home's task records (run on demand; not part of the test suite).

``run_task``'s answer looks for the project's unfinished in-place task
(``TaskStore.unfinished_inplace``). Builds before the index of unfinished records
(``core/unfinished.py``) read every record, so the cost grew with the history. This bench fills a
temporary home with ``--records`` records, each created and then finished as a task's flow does
(default 1,000), and prints the median of
``--repeat`` scans that find nothing, cold (a new process's first scan: every record read) and
warm (every record a cache hit), in ms.

With ``--compare PYTHON`` the same measurement also runs under another interpreter (a checkout
of an earlier build with its own venv) and the ratios are printed: this build / that one.

Usage: ``.venv/bin/python bench/bench_taskstore.py [--records 1000] [--repeat 20]
[--compare /path/to/other/.venv/bin/python]``
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def _scan_before_03f398d(store: Any, norm: str) -> dict[str, Any] | None:
    """The same scan in builds before ``TaskStore.unfinished_inplace`` existed (it was
    ``Handlers._unfinished``), so that ``--compare`` can measure them."""
    for record_id in sorted(store.list_ids(("tsk_", "vfy_")), reverse=True):
        task = store.read_cached(record_id)
        if (task and task.get("projectPath") == norm and not task.get("finishedAt")
                and task.get("isolation") != "worktree"):
            return task  # type: ignore[no-any-return]
    return None


def measure(records: int, repeat: int) -> dict[str, float]:
    """Fill a temporary home with ``records`` finished records; return ``{"cold": ms, "warm": ms}``
    (the first scan, then the median of ``repeat`` more)."""
    from tianshu_mcp.core.ids import new_task_id
    from tianshu_mcp.core.taskstore import TaskStore

    with tempfile.TemporaryDirectory(prefix="bench-taskstore-") as tmp:
        store = TaskStore(Path(tmp))
        for i in range(records):  # created, then finished, as a task's flow does
            task_id = new_task_id()
            store.create(task_id, {"projectPath": f"/projects/p{i}", "isolation": "inplace", "agentId": "a",
                                   "task": "fix the failing test " * 10})
            store.update(task_id, finishedAt="2026-01-01T00:00:00Z")

        find = getattr(store, "unfinished_inplace", None) or (lambda norm: _scan_before_03f398d(store, norm))

        def scan() -> float:
            t = time.perf_counter()
            assert find("/elsewhere") is None
            return (time.perf_counter() - t) * 1000

        cold = scan()
        warm = statistics.median(scan() for _ in range(repeat))
    return {"cold": cold, "warm": warm}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--compare", help="another build's Python interpreter")
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)  # one measurement, for --compare
    args = parser.parse_args()
    if args.records < 1 or args.repeat < 1:
        parser.error("--records and --repeat must be at least 1")
    figures = measure(args.records, args.repeat)
    if args.json:
        print(json.dumps(figures))
        return 0
    print(f"scan of {args.records} finished records (median of {args.repeat}): "
          f"cold {figures['cold']:.3f} ms, warm {figures['warm']:.3f} ms")
    if args.compare:
        out = subprocess.run([args.compare, __file__, "--records", str(args.records), "--repeat", str(args.repeat),
                              "--json"], capture_output=True, text=True, check=True)
        other = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"other build: cold {other['cold']:.3f} ms, warm {other['warm']:.3f} ms; "
              f"ratio cold {figures['cold'] / other['cold']:.2f}×, warm {figures['warm'] / other['warm']:.2f}×")
    return 0


if __name__ == "__main__":
    sys.exit(main())
