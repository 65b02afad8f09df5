"""acceptance.check_result: the ``checks[]`` entry of a report (docs/acceptance.md §1.3) keeps its keys
and their order whatever builds it (the runner, ``git-diff-check``, the engine's gates)."""

from __future__ import annotations

import json

from tianshu_mcp.acceptance import runner
from tianshu_mcp.acceptance.check_result import SKIP_CANCELLED, CheckResult
from tianshu_mcp.acceptance.runner import skip_result

FIXED = ["name", "cmd", "passed", "durationMs", "exitCode", "outputTail", "timeout"]


def test_a_skip_result_has_the_runner_keys_in_order() -> None:
    out = skip_result("lint", "ruff check .", SKIP_CANCELLED, optional=True)
    assert list(out) == [*FIXED, "skipped", "reason", "optional", "aborted"]
    assert json.dumps(out) == json.dumps({
        "name": "lint", "cmd": "ruff check .", "passed": True, "durationMs": 0, "exitCode": None, "outputTail": "",
        "timeout": False, "skipped": True, "reason": "task cancelled, not run", "optional": True, "aborted": False})
    assert list(skip_result("lint", "ruff check .", SKIP_CANCELLED)) == [*FIXED, "skipped", "reason", "aborted"]


def test_a_ran_check_lists_only_what_it_has() -> None:
    plain = CheckResult(name="git-diff-check", cmd="git diff --check", passed=True, duration_ms=12, exit_code=0)
    assert list(plain.to_json()) == [*FIXED, "aborted"]
    full = CheckResult(name="t", cmd="pytest", passed=False, duration_ms=5, exit_code=1, output_tail="x",
                       reason="why", optional=True, aborted=True, tests={"total": 1}, findings=[{"file": "a"}],
                       junit={"files": []})
    assert list(full.to_json()) == [*FIXED, "reason", "optional", "aborted", "tests", "findings", "junit"]


def test_the_requirechanges_gate_has_no_aborted_key() -> None:
    gate = CheckResult(name="no-changes", cmd="requireChanges gate", passed=False, output_tail="o", reason="r",
                       aborted=None)
    assert list(gate.to_json()) == [*FIXED, "reason"]


def test_the_runner_still_exports_the_reasons_and_the_tag() -> None:
    from tianshu_mcp.acceptance import check_result

    for name in ("ZERO_TEST_REASON", "SPAWN_REASON_PREFIX", "SKIP_CANCELLED", "display_reason", "check_tag"):
        assert getattr(runner, name) is getattr(check_result, name)
