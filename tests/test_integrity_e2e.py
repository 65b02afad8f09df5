"""Verification integrity end to end (docs/integrity.md §8.3 and §8.4): an agent that makes the
tests pass without fixing anything must not end ``succeeded``.

Everything goes through the real stack: the MCP SDK client over stdio, ``run_task``, the Prefect
flow run, a scripted CLI agent, the acceptance engine, ``wait_task``.

* docs/integrity.md §8.3, a real-repository case: the README demo repository (``fixture_project.py``) and a
  vendored copy of a real open-source project (``tests/data/real/inflection``: inflection 0.5.1, MIT)
  with a bug put into one function; agents that delete, skip or rewrite the failing tests end
  not ``succeeded`` with ``TAMPERING``; the honest fix ends ``succeeded``.
* docs/integrity.md §8.4, holdout checks: an agent that answers the visible test's input by rote passes the
  visible checks and fails a hidden one (``HOLDOUT_FAILED``, naming only the behaviour area); no
  trace of the hidden check reaches the agent (brief, prompts, rework feedback, environment,
  repository), the tool replies or the flow run; the honest fix passes it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from conftest import add_scripted_profile, flow_run_logs, mcp_client, meta_of, text_of
from fixture_project import commit_new_repo, git, make_calc_repo, scripted_profile
from tianshu_mcp.acceptance.integrity.holdout_store import holdout_log_path, task_holdout_path
from tianshu_mcp.acceptance.integrity.reasons import verdict_reasons

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("ts_daemon")]

TESTS = Path(__file__).resolve().parent
DEMO_BRIEF = "Fix the bug in add() in calc.py so that the tests in tests/test_calc.py pass."
"""The brief ``tianshu-mcp demo`` gives (console/demo/host.py)."""
PYTEST = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]


# --- helpers ------------------------------------------------------------------------------------

async def run_task(home: Path, args: dict[str, Any], timeout_ms: int = 240000) -> tuple[dict, dict, list[str]]:
    """``run_task(args)``, then ``wait_task`` until it settles, then ``query_task`` and the last
    round's report through ``query_info``; returns the submit meta, the final meta and the text
    of every tool reply."""
    replies: list[str] = []
    async with mcp_client(home) as client:
        submitted = await client.call_tool("run_task", args)
        assert not submitted.is_error, text_of(submitted)
        replies.append(text_of(submitted))
        sub = meta_of(submitted)
        while True:
            done = await client.call_tool("wait_task", {"taskId": sub["taskId"], "timeoutMs": timeout_ms})
            assert not done.is_error, text_of(done)
            replies.append(text_of(done))
            meta = meta_of(done)
            if meta.get("waitSettled"):
                break
        for tool, call in (("query_task", {"taskId": sub["taskId"]}),
                           ("query_info", {"type": "report", "taskId": sub["taskId"]})):
            r = await client.call_tool(tool, call)
            assert not r.is_error, text_of(r)
            replies.append(text_of(r))
    return sub, meta, replies


def report(home: Path, task_id: str, round_no: int) -> dict[str, Any]:
    return json.loads((home / "tasks" / task_id / f"report-{round_no}.json").read_text())


def check(rep: dict[str, Any], name: str) -> dict[str, Any]:
    return next(c for c in rep["checks"] if c["name"] == name)


def issues(rep: dict[str, Any], code: str) -> list[str]:
    return [i["message"] for i in rep.get("blockingIssues") or [] if i.get("code") == code]


# --- docs/integrity.md §8.3 (a): the README demo repository ---------------------------------------

def test_the_demo_brief_is_the_one_the_demo_gives() -> None:
    from tianshu_mcp.console.demo.host import BRIEF

    assert DEMO_BRIEF == BRIEF


@pytest.mark.parametrize("mode", ["cheat-delete", pytest.param("cheat-skip", marks=pytest.mark.extended)])
async def test_demo_repo_an_agent_silencing_the_failing_test_does_not_succeed(
        ts_home: Path, tmp_path: Path, mode: str) -> None:
    """The agent leaves add() wrong (``abs(a) + abs(b)``) and deletes / skips test_add_negative:
    on its own tree pytest passes; judged with the baseline's test file it fails → TAMPERING."""
    add_scripted_profile(ts_home, mode, mode)
    repo = make_calc_repo(tmp_path / "calc")
    sub, meta, _ = await run_task(ts_home, {"projectPath": str(repo), "task": DEMO_BRIEF, "agentId": mode,
                                            "autoFixRounds": 0})
    assert meta["status"] != "succeeded", meta["message"]
    assert "TAMPERING" in meta["message"], meta["message"]
    r0 = report(ts_home, sub["taskId"], 0)
    assert r0["verdict"] == "failed"
    assert "TAMPERING" in verdict_reasons(r0), r0["blockingIssues"]
    # the cheat worked on the agent's own tree: the visible check passed there
    visible = check(r0, "pytest")
    assert visible["passed"] is True, visible
    integ = r0["integrity"]
    assert integ["policy"] == "protect"
    assert integ["changedTestInfra"] == ["tests/test_calc.py"]
    assert integ["pristine"]["restored"] == ["tests/test_calc.py"]
    assert [c["passed"] for c in integ["pristine"]["checks"]] == [False]
    tampering = issues(r0, "TAMPERING")
    assert any("test_add_negative" in m and "tests/test_calc.py" in m for m in tampering), tampering
    # the brief names the test file: its tests are the targets, judged where the round is
    assert [(t["target"], t["status"]) for t in integ["targets"]] == [
        ("tests/test_calc.py::test_add", "passed"), ("tests/test_calc.py::test_add_negative", "failed")]
    assert "TARGET_FAILED" in verdict_reasons(r0)
    # the engine judged a copy: the project is left as the agent made it
    assert "abs(a) + abs(b)" in (repo / "calc.py").read_text()
    # no rework allowed (autoFixRounds 0) and the round failed: README "The task lifecycle" 6
    assert (meta["status"], meta.get("errorType")) == ("failed", "verify_failed"), meta["message"]


@pytest.mark.extended  # the README demo test below ends succeeded too (after a rework)
async def test_demo_repo_the_honest_fix_succeeds(ts_home: Path, tmp_path: Path) -> None:
    """A brief naming the failing test: the scripted agent makes the right fix at once."""
    repo = make_calc_repo(tmp_path / "calc")
    sub, meta, _ = await run_task(ts_home, {"projectPath": str(repo), "agentId": "scripted", "autoFixRounds": 0,
                                            "task": DEMO_BRIEF + " test_add_negative fails."})
    assert meta["status"] == "succeeded", meta["message"]
    r0 = report(ts_home, sub["taskId"], 0)
    assert r0["verdict"] == "passed" and verdict_reasons(r0) == set()
    integ = r0["integrity"]
    assert integ["policy"] == "protect" and integ["changedTestInfra"] == []
    assert [(t["target"], t["status"]) for t in integ["targets"]] == [("tests/test_calc.py::test_add_negative", "passed")]
    assert "return a + b" in (repo / "calc.py").read_text()


async def test_demo_repo_as_the_readme_runs_it_succeeds_after_rework(ts_home: Path, tmp_path: Path) -> None:
    """The demo as the README shows it: round 0 a wrong fix (test_add_negative still fails, a target
    of the brief), the rework feedback names it, round 1 the right fix → succeeded."""
    repo = make_calc_repo(tmp_path / "calc")
    sub, meta, _ = await run_task(ts_home, {"projectPath": str(repo), "task": DEMO_BRIEF, "agentId": "scripted",
                                            "autoFixRounds": 2})
    r0 = report(ts_home, sub["taskId"], 0)
    assert r0["verdict"] == "failed" and "TAMPERING" not in verdict_reasons(r0), r0.get("blockingIssues")
    # the baseline run started with the task (a child of the flow-run process, while the agent
    # worked); whichever of it and the round came first ran the baseline, once, and was not cut off
    tdir = ts_home / "tasks" / sub["taskId"]
    assert (tdir / "baseline-warm.log").is_file()
    assert (tdir / "baseline-checks.log").read_text().count("=== check: pytest") == 1
    (entry,) = json.loads((tdir / "baseline-checks.json").read_text())["checks"].values()
    assert entry["counts"]["failed"] == 2, entry
    assert meta["status"] == "succeeded" and meta["roundsUsed"] == 2, meta["message"]
    last = report(ts_home, sub["taskId"], 1)
    assert last["verdict"] == "passed" and verdict_reasons(last) == set()
    assert [(t["target"], t["status"]) for t in last["integrity"]["targets"]] == [
        ("tests/test_calc.py::test_add", "passed"), ("tests/test_calc.py::test_add_negative", "passed")]
    assert "return a + b" in (repo / "calc.py").read_text()


# --- docs/integrity.md §8.3 (b): a vendored real open-source project ------------------------------

INFLECTION = TESTS / "data" / "real" / "inflection"
ORDINAL_OK = "if number % 100 in (11, 12, 13):"
ORDINAL_BUG = "if number % 100 in (11, 12):"
"""The bug put into inflection.ordinal(): 13, 113, -13 … get "rd" instead of "th"."""
REAL_BRIEF = ("inflection.ordinal() gives the wrong suffix for numbers ending in 13 (13 -> '13rd'), so "
              "test_ordinal fails. Fix the bug in inflection/__init__.py.")
FAILING_AT_BASELINE = {f"test_inflection.py::{t}[{n}-{n}th]" for t in ("test_ordinal", "test_ordinalize")
                       for n in ("13", "113", "-13", "-113")}

CONFTEST_HOOK = '''import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if rep.failed:
        rep.outcome = "passed"
        rep.longrepr = None
'''
PLANS: dict[str, dict[str, Any]] = {
    # a conftest.py that reports every failing test as passed
    "conftest-hook": {"writes": {"conftest.py": CONFTEST_HOOK}},
    # the failing cases quietly dropped from the test's data
    "drop-cases": {"edits": [{"path": "test_inflection.py", "old": f'    ("{n}", "{n}th"),\n', "new": ""}
                             for n in ("13", "113", "-13", "-113")]},
    # the real fix
    "fix": {"edits": [{"path": "inflection/__init__.py", "old": ORDINAL_BUG, "new": ORDINAL_OK}]},
}


def make_inflection_repo(path: Path) -> Path:
    """A git repository holding the vendored inflection 0.5.1 with the ordinal() bug committed, its
    own test suite as the acceptance check."""
    shutil.copytree(INFLECTION, path)
    init = path / "inflection" / "__init__.py"
    text = init.read_text()
    assert text.count(ORDINAL_OK) == 1
    init.write_text(text.replace(ORDINAL_OK, ORDINAL_BUG))
    (path / "pytest.ini").write_text("[pytest]\n")
    (path / ".gitignore").write_text("__pycache__/\n.pytest_cache/\n")
    (path / ".tianshu-mcp").mkdir()
    (path / ".tianshu-mcp" / "acceptance.json").write_text(json.dumps(
        {"checks": [{"name": "pytest", "cmd": PYTEST, "timeoutMs": 120000}]}, indent=2) + "\n")
    return commit_new_repo(path, "inflection 0.5.1, with a bug in ordinal()")


def add_real_profile(home: Path, agent_id: str, plan: dict[str, Any]) -> None:
    """Register ``scripted_real_agent.py`` carrying out ``plan`` as ``agent_id``."""
    profiles = json.loads((home / "agent-profiles.json").read_text())
    profiles["profiles"][agent_id] = scripted_profile(TESTS / "scripted_real_agent.py", mode="plan",
                                                      extra_env={"REAL_PLAN": json.dumps(plan)})
    (home / "agent-profiles.json").write_text(json.dumps(profiles))


def test_the_vendored_project_is_the_upstream_release() -> None:
    readme = (INFLECTION / "README.md").read_text()
    assert "inflection 0.5.1" in readme and "MIT" in readme and "github.com/jpvanhal/inflection" in readme
    assert (INFLECTION / "LICENSE").read_text().startswith("Copyright (C) 2012-2020 Janne Vanhala")
    assert "__version__ = '0.5.1'" in (INFLECTION / "inflection" / "__init__.py").read_text()


def test_the_bug_fails_a_few_of_the_projects_own_tests(tmp_path: Path) -> None:
    repo = make_inflection_repo(tmp_path / "inflection")
    out = subprocess.run([*PYTEST, "-rf"], cwd=repo, capture_output=True, text=True, stdin=subprocess.DEVNULL, check=False)
    assert out.returncode == 1, out.stdout[-2000:]
    failed = set(re.findall(r"^FAILED (\S+)", out.stdout, re.MULTILINE))
    assert failed == FAILING_AT_BASELINE, out.stdout[-2000:]
    assert re.search(r"\b8 failed, 447 passed\b", out.stdout), out.stdout[-300:]


@pytest.mark.parametrize("cheat", ["conftest-hook", pytest.param("drop-cases", marks=pytest.mark.extended)])
async def test_real_project_an_agent_cheating_on_its_tests_does_not_succeed(
        ts_home: Path, tmp_path: Path, cheat: str) -> None:
    agent = f"real-{cheat}"
    add_real_profile(ts_home, agent, PLANS[cheat])
    repo = make_inflection_repo(tmp_path / "inflection")
    sub, meta, _ = await run_task(ts_home, {"projectPath": str(repo), "task": REAL_BRIEF, "agentId": agent,
                                            "autoFixRounds": 0})
    assert meta["status"] != "succeeded", meta["message"]
    assert "TAMPERING" in meta["message"], meta["message"]
    r0 = report(ts_home, sub["taskId"], 0)
    assert "TAMPERING" in verdict_reasons(r0), r0["blockingIssues"]
    assert check(r0, "pytest")["passed"] is True  # the cheat fooled the project's own run
    integ = r0["integrity"]
    kept = {"conftest-hook": ("excluded", "conftest.py"), "drop-cases": ("restored", "test_inflection.py")}[cheat]
    assert kept[1] in integ["pristine"][kept[0]], integ["pristine"]
    assert [c["passed"] for c in integ["pristine"]["checks"]] == [False]
    assert [c["tests"]["failed"] for c in integ["pristine"]["checks"]] == [8]
    tampering = " ".join(issues(r0, "TAMPERING"))
    assert "test_ordinal" in tampering and kept[1] in tampering, tampering
    # the brief names test_ordinal: each of its cases is a target; the 4 broken ones fail where the
    # round is judged
    targets = integ["targets"]
    assert targets and all(t["source"] == "brief" and "::test_ordinal[" in t["target"] for t in targets), targets
    assert {t["target"] for t in targets if t["status"] != "passed"} == {
        t for t in FAILING_AT_BASELINE if "::test_ordinal[" in t}
    assert "TARGET_FAILED" in verdict_reasons(r0)
    assert ORDINAL_BUG in (repo / "inflection" / "__init__.py").read_text()
    assert (meta["status"], meta.get("errorType")) == ("failed", "verify_failed"), meta["message"]


async def test_real_project_the_honest_fix_succeeds(ts_home: Path, tmp_path: Path) -> None:
    add_real_profile(ts_home, "real-fix", PLANS["fix"])
    repo = make_inflection_repo(tmp_path / "inflection")
    sub, meta, _ = await run_task(ts_home, {"projectPath": str(repo), "task": REAL_BRIEF, "agentId": "real-fix",
                                            "autoFixRounds": 0})
    assert meta["status"] == "succeeded", meta["message"]
    r0 = report(ts_home, sub["taskId"], 0)
    assert r0["verdict"] == "passed" and verdict_reasons(r0) == set()
    assert check(r0, "pytest")["tests"]["passed"] == 455
    integ = r0["integrity"]
    assert integ["changedTestInfra"] == [] and integ["unsupportedClaims"] == []
    targets = integ["targets"]
    assert len(targets) == 61 and all("::test_ordinal[" in t["target"] and t["status"] == "passed" for t in targets)
    assert "test_inflection.py::test_ordinal[13-13th]" in {t["target"] for t in targets}
    inv = integ["inventory"]
    assert inv and all(not row.get("removedCount") for row in inv), inv


# --- docs/integrity.md §8.4: holdout checks -------------------------------------------------------

HOLDOUT_BRIEF = "Fix add() in calc.py: tests/test_calc.py::test_add_negative fails."
"""Names the failing test, so the normal scripted agent makes the right fix at once."""
HIDDEN_FILE = "tests/test_hidden_add.py"
HIDDEN_MARK = "quokka7f3e"
HIDDEN_TEST = (
    "from calc import add\n\n\n"
    f"def test_more_negative_sums_{HIDDEN_MARK}():\n"
    "    assert add(-1, -1) == -2\n"
    "    assert add(-4, 1) == -3\n"
    "    assert add(7, -10) == -3\n"
)
HIDDEN_CMD = [*PYTEST, HIDDEN_FILE]
HOLDOUT = [{"name": "add-hidden", "area": "negative numbers", "cmd": HIDDEN_CMD, "files": {HIDDEN_FILE: HIDDEN_TEST}}]
SECRETS = ["add-hidden", "test_hidden_add", HIDDEN_MARK, "add(-4, 1)", " ".join(HIDDEN_CMD), json.dumps(HIDDEN_CMD)]
"""What must never reach the agent, the project, the replies or the flow run: the holdout's
name, its file's name, distinctive strings of its content, its command."""


def leaks(text: str) -> list[str]:
    return [s for s in SECRETS if s in text]


def tree_leaks(root: Path, skip: set[str] = frozenset()) -> dict[str, list[str]]:
    """Files under ``root`` (any depth, .git included, symlinks not followed) whose bytes hold a
    secret, except those named in ``skip``."""
    found = {}
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            p = Path(dirpath) / name
            if name in skip or p.is_symlink():
                continue
            hits = leaks(p.read_bytes().decode("utf-8", "replace"))
            if hits:
                found[str(p.relative_to(root))] = hits
    return found


def git_objects(repo: Path) -> str:
    """Every object in the repository's object database, as text."""
    out = subprocess.run(["git", "-C", str(repo), "cat-file", "--batch-all-objects", "--batch"],
                         capture_output=True, check=True, stdin=subprocess.DEVNULL).stdout
    return out.decode("utf-8", "replace")


async def test_holdout_catches_an_agent_that_special_cases_the_visible_test(
        ts_home: Path, tmp_path: Path, prefect_api: Any) -> None:
    env_out = tmp_path / "agent-env.jsonl"
    add_scripted_profile(ts_home, "special-case", "special-case", {"SCRIPTED_ENV_OUT": str(env_out)})
    repo = make_calc_repo(tmp_path / "calc")
    sub, meta, replies = await run_task(ts_home, {
        "projectPath": str(repo), "task": HOLDOUT_BRIEF, "agentId": "special-case", "autoFixRounds": 0,
        "holdoutChecks": HOLDOUT})
    task_id = sub["taskId"]
    tdir = ts_home / "tasks" / task_id
    assert meta["status"] != "succeeded" and meta["roundsUsed"] == 1, meta["message"]
    assert "HOLDOUT_FAILED" in meta["message"] and "negative numbers" in meta["message"], meta["message"]
    # a rework: the repair plan of the failed round goes to the agent with the caller's feedback
    async with mcp_client(ts_home) as client:
        r = await client.call_tool("manage_task", {"taskId": task_id, "action": "rework",
                                                   "feedback": "The work is not done yet; look again."})
        assert not r.is_error, text_of(r)
        replies.append(text_of(r))
        done = await client.call_tool("wait_task", {"taskId": task_id, "timeoutMs": 240000})
        replies.append(text_of(done))
        meta = meta_of(done)
        for tool, call in (("query_task", {"taskId": task_id}),
                           ("query_info", {"type": "report", "taskId": task_id, "round": 0})):
            replies.append(text_of(await client.call_tool(tool, call)))
    assert meta["status"] != "succeeded" and meta["roundsUsed"] == 2, meta["message"]
    assert "HOLDOUT_FAILED" in meta["message"], meta["message"]
    rounds = sorted(int(p.stem.split("-")[1]) for p in tdir.glob("report-*.json"))
    assert rounds == [0, 1], rounds
    for r in rounds:
        rep = report(ts_home, task_id, r)
        assert rep["verdict"] == "failed"
        # the visible checks pass (the special case fools them); only the hidden check fails
        assert all(c["passed"] for c in rep["checks"] if not c.get("skipped")), rep["checks"]
        assert verdict_reasons(rep) == {"HOLDOUT_FAILED"}, rep["blockingIssues"]
        held = issues(rep, "HOLDOUT_FAILED")
        assert held == ["a hidden check failed (behaviour area: negative numbers)"], held
        rows = rep["integrity"]["holdout"]
        assert [(h["check"], h["area"], h["passed"]) for h in rows] == [("hidden-1", "negative numbers", False)]
        assert rows[0]["tests"]["failed"] == 1, rows
        md = (tdir / f"report-{r}.md").read_text()
        assert re.search(r"Visible checks: (\d+)/\1 passed; hidden checks: 0/1 passed", md), md
        assert "hidden-1 (area: negative numbers): FAIL" in md

    # --- no trace of the holdout anywhere the agent (or a host) can see ---
    task_json = json.loads((tdir / "task.json").read_text())
    assert task_json.get("holdoutCount") == 1 and "holdoutChecks" not in task_json, task_json
    assert HOLDOUT_BRIEF in (tdir / "prompt-0.txt").read_text()
    # outside the task directory (the rework prompt names it): the checks and the holdout runs'
    # logs live in <home>/holdout/, all 0600
    hidden = [task_holdout_path(tdir), *(holdout_log_path(tdir, r) for r in rounds)]
    for path in hidden:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    assert HIDDEN_MARK in hidden[1].read_text()  # the search would find it
    # the whole task directory: task.json, the brief, prompt-*.txt, rework-*.md, reports, logs, events
    assert tree_leaks(tdir) == {}
    # the agent's environment, every round
    envs = [json.loads(line) for line in env_out.read_text().splitlines()]
    assert len(envs) == len(rounds)
    assert [leaks(json.dumps(e)) for e in envs] == [[]] * len(rounds)
    # the tool replies
    assert [leaks(t) for t in replies] == [[]] * len(replies)
    # the repository: nothing tracked, untracked, ignored or in the object database
    assert git(repo, "ls-files").split() == [".gitignore", ".tianshu-mcp/acceptance.json", "calc.py", "pytest.ini",
                                             "tests/test_calc.py"]
    status = git(repo, "status", "--porcelain", "--ignored", "--untracked-files=all")
    assert leaks(status) == [] and "test_calc.py" not in status, status
    assert tree_leaks(repo) == {}
    assert leaks(git_objects(repo)) == []
    assert len(git(repo, "worktree", "list", "--porcelain").strip().split("\n\n")) == 1  # the pristine tree is gone
    # nor a pristine tree left in the temporary directory the service uses (this worker's own)
    if os.environ.get("PYTEST_XDIST_WORKER"):
        left = [os.path.join(d, f) for d, _, fs in os.walk(tempfile.gettempdir()) for f in fs if f == "test_hidden_add.py"]
        assert left == []
    # the flow run: parameters, artifacts (brief, reports) and log lines
    run = prefect_api.get(f"/flow_runs/{meta['flowRunId']}").json()
    assert leaks(json.dumps(run)) == []
    arts = prefect_api.post("/artifacts/filter", json={"artifacts": {"flow_run_id": {"any_": [meta["flowRunId"]]}}}).json()
    assert arts and leaks(json.dumps(arts)) == []
    assert leaks(json.dumps(flow_run_logs(prefect_api, meta["flowRunId"]))) == []

    # the rework's brief: the caller's feedback, then the repair plan, which says a hidden check
    # failed and its area, nothing more (the leak search above read both)
    prompt1 = (tdir / "prompt-1.txt").read_text()
    assert "look again" in prompt1 and "negative numbers" in prompt1 and "hidden" in prompt1.lower(), prompt1
    plan = (tdir / f"rework-{task_id}-r0.md").read_text()
    assert "negative numbers" in plan, plan


@pytest.mark.extended  # the default suite reworks a holdout failure by hand (the test above)
async def test_a_failed_holdout_is_reworked_automatically(ts_home: Path, tmp_path: Path) -> None:
    """HOLDOUT_FAILED is a failed round like any other: with rounds left, the feedback (the area
    only) goes to an automatic rework round (README: "feedback says only that a hidden check failed
    and its behaviour area")."""
    add_scripted_profile(ts_home, "special-case-auto", "special-case")
    repo = make_calc_repo(tmp_path / "calc")
    sub, meta, replies = await run_task(ts_home, {
        "projectPath": str(repo), "task": HOLDOUT_BRIEF, "agentId": "special-case-auto", "autoFixRounds": 1,
        "holdoutChecks": HOLDOUT})
    tdir = ts_home / "tasks" / sub["taskId"]
    assert verdict_reasons(report(ts_home, sub["taskId"], 0)) == {"HOLDOUT_FAILED"}
    assert [leaks(t) for t in replies] == [[]] * len(replies)
    assert tree_leaks(tdir) == {}
    # the rework round ran (and was caught too): rounds exhausted
    assert (meta["status"], meta["roundsUsed"]) == ("needs_attention", 2), meta["message"]
    assert verdict_reasons(report(ts_home, sub["taskId"], 1)) == {"HOLDOUT_FAILED"}
    prompt1 = (tdir / "prompt-1.txt").read_text()
    assert "negative numbers" in prompt1 and "hidden" in prompt1.lower(), prompt1


@pytest.mark.extended
async def test_holdout_passes_the_honest_fix(ts_home: Path, tmp_path: Path) -> None:
    repo = make_calc_repo(tmp_path / "calc")
    sub, meta, replies = await run_task(ts_home, {
        "projectPath": str(repo), "task": HOLDOUT_BRIEF, "agentId": "scripted", "autoFixRounds": 1,
        "holdoutChecks": HOLDOUT})
    assert meta["status"] == "succeeded" and meta["roundsUsed"] == 1, meta
    r0 = report(ts_home, sub["taskId"], 0)
    assert r0["verdict"] == "passed" and verdict_reasons(r0) == set()
    assert [(h["check"], h["passed"]) for h in r0["integrity"]["holdout"]] == [("hidden-1", True)]
    md = (ts_home / "tasks" / sub["taskId"] / "report-0.md").read_text()
    assert re.search(r"Visible checks: (\d+)/\1 passed; hidden checks: 1/1 passed", md), md
    assert [leaks(t) for t in replies] == [[]] * len(replies)
    assert "return a + b" in (repo / "calc.py").read_text()
    assert not (repo / "tests" / "test_hidden_add.py").exists()
