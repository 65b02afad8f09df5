"""Every Prefect task of ours is made by ``tasks.common.step`` (design note 68): no retries and
no cache policy, so a step always does its work (a rework reruns the same flow run with the same
inputs, and a cached dispatch or verify would be a verdict nobody earned), and no time goes to
hashing inputs and source for a cache key that is never wanted."""

from __future__ import annotations

import ast
from pathlib import Path

from prefect.cache_policies import NO_CACHE
from prefect.tasks import Task

ROOT = Path(__file__).resolve().parent.parent


def test_our_steps_have_no_cache_policy_and_no_retries() -> None:
    from tianshu_mcp.flows.verify import verify_baseline
    from tianshu_mcp.tasks.baseline import capture_baseline_task
    from tianshu_mcp.tasks.dispatch import dispatch_round
    from tianshu_mcp.tasks.dry_run import dry_run_task
    from tianshu_mcp.tasks.repair import write_repair_plan
    from tianshu_mcp.tasks.verify import verify_round_task

    steps = [verify_baseline, capture_baseline_task, dispatch_round, dry_run_task, write_repair_plan, verify_round_task]
    for s in steps:
        assert isinstance(s, Task) and s.cache_policy is NO_CACHE and s.retries == 0, s.name
        assert s.with_options(task_run_name="x").cache_policy is NO_CACHE, s.name  # kept by with_options


def test_no_module_decorates_with_prefect_task_directly() -> None:
    """A new ``@task`` would get Prefect's default cache policy back: they all go through ``step``."""
    direct = []
    for path in ROOT.glob("*/**/*.py"):
        if path.parts[len(ROOT.parts)] in ("tests", "bench", ".venv", "scripts", "build"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for dec in node.decorator_list:
                    target = dec.func if isinstance(dec, ast.Call) else dec
                    name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
                    if name == "task":
                        direct.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}")
    assert direct == []
