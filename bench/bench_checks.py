"""Benchmark the check runner (run on demand; not part of the test suite).

* 8 independent checks of 1 s each at verifyConcurrency 4: wall time of the round against the
  physical limit (8 / 4 × 1 s = 2.0 s), as a ratio (1.00 = no overhead);
* verify overhead on an empty check list (baseline reuse, git-diff-check, analysis, report).

Usage: ``.venv/bin/python bench/bench_checks.py [--repeat 5]``
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

from tianshu_mcp.acceptance.engine import VerifyRequest, verify_round
from tianshu_mcp.acceptance.git import capture_baseline


def make_repo(root: Path, checks: list[dict], concurrency: int) -> Path:
    repo = root / "repo"
    repo.mkdir()
    (repo / "a.txt").write_text("a\n")
    (repo / ".tianshu-mcp").mkdir()
    (repo / ".tianshu-mcp" / "acceptance.json").write_text(json.dumps(
        {"checks": checks, "verifyConcurrency": concurrency, "requireChanges": False}))
    for args in (["init", "-q"], ["config", "user.email", "b@example.invalid"], ["config", "user.name", "b"],
                 ["add", "-A"], ["commit", "-qm", "init"]):
        subprocess.run(["git", "-C", str(repo), *args], check=True, stdin=subprocess.DEVNULL)
    return repo


def run(repo: Path, home: Path, n: int, tag: str) -> list[float]:
    baseline = capture_baseline(repo)
    walls = []
    for i in range(n):
        task_dir = home / "tasks" / f"vfy_20260101000000_{i:06x}{tag}"[:33]
        t = time.perf_counter()
        out = verify_round(VerifyRequest(task_id=task_dir.name, project_path=str(repo), task_dir=task_dir, round=0,
                                         baseline=baseline, home=home))
        walls.append(time.perf_counter() - t)
        assert out.passed, out.report["message"]
    return walls


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        sleepers = [{"name": f"sleep-{i}", "cmd": [sys.executable, "-c", "import time; time.sleep(1)"]} for i in range(8)]
        (root / "a").mkdir()
        (root / "b").mkdir()
        walls = run(make_repo(root / "a", sleepers, 4), root / "home-a", args.repeat, "a")
        med = statistics.median(walls)
        print(f"8 checks x 1 s at verifyConcurrency 4: median {med:.2f} s over {len(walls)} rounds "
              f"(min {min(walls):.2f} s); physical limit 2.00 s; ratio {med / 2.0:.2f}")
        empty = run(make_repo(root / "b", [], 1), root / "home-b", args.repeat * 2, "b")
        print(f"verify overhead with an empty check list: median {statistics.median(empty) * 1000:.0f} ms "
              f"(min {min(empty) * 1000:.0f} ms) over {len(empty)} rounds")
    return 0


if __name__ == "__main__":
    sys.exit(main())
