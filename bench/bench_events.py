"""Benchmark query_task's event read (run on demand; not part of the test suite).

``recentEvents`` reads a 64 KiB tail window of ``task.jsonl``, so a task with a 100 MB event log
costs the same as a small one (docs/lifecycle.md §4: ≤ 20 ms p50). Prints the median and
p95 of :meth:`TaskStore.recent_agent_events` on a 100-line and a 100 MB ``task.jsonl``, and
their ratio.

Usage: ``.venv/bin/python bench/bench_events.py [--repeat 200]``
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from tianshu_mcp.core.taskstore import TaskStore

TASK = "tsk_20260101000000_abcdef"
LINE = json.dumps({"ts": "2026-01-01T00:00:00.000Z", "event": "note", "state": "running", "detail": "x" * 180}) + "\n"
SEMANTIC = json.dumps({"ts": "2026-01-01T00:00:01.000Z", "event": "task_dispatched", "state": "running",
                       "detail": "round 3: brief handed to codex", "data": {"round": 3}}) + "\n"


def make(home: Path, size_bytes: int) -> TaskStore:
    store = TaskStore(home)
    d = store.dir(TASK)
    d.mkdir(parents=True)
    block = LINE * 9 + SEMANTIC  # ten lines, one of them a semantic event
    with open(d / "task.jsonl", "w") as fh:
        written = 0
        while written < size_bytes:
            chunk = block * max(1, min(500, (size_bytes - written) // len(block)))
            fh.write(chunk)
            written += len(chunk)
    return store


def measure(store: TaskStore, repeat: int) -> list[float]:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        events = store.recent_agent_events(TASK, 10)
        times.append((time.perf_counter() - t0) * 1000)
        assert len(events) == 10
    return times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        small = measure(make(Path(tmp) / "small", 100 * len(LINE)), args.repeat)  # 100 lines
        big = measure(make(Path(tmp) / "big", 100 << 20), args.repeat)
    for name, t in (("100 lines", small), ("100 MB", big)):
        q = statistics.quantiles(t, n=20)
        print(f"recent_agent_events on a {name:9} task.jsonl: median {statistics.median(t):6.2f} ms, p95 {q[18]:6.2f} ms")
    print(f"ratio 100 MB / 100 lines (median): {statistics.median(big) / statistics.median(small):.2f} (goal: ≤ 20 ms p50)")


if __name__ == "__main__":
    main()
