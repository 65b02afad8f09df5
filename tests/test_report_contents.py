"""What a round's report shows a newcomer (docs/acceptance.md §8.8, design note "What a report shows of
a round"): the agent's own output (never our spawn line quoting the brief), the brief, the change's
diff with the whole patch beside the report, the program each check really ran, one directive per
parametrized test, and an HTML page that fits a 1400 px window (checked in headless Chromium).

Real parts: git repositories in temp dirs, a real CLI agent process, real pytest runs, the real
acceptance engine, Chromium through Playwright."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import sys
from pathlib import Path

import pytest

from tianshu_mcp.acceptance.config import CheckDef
from tianshu_mcp.acceptance.directives import extract_directives
from tianshu_mcp.acceptance.engine import VerifyRequest, verify_round
from tianshu_mcp.acceptance.git import capture_baseline
from tianshu_mcp.acceptance.html_report import render_html
from tianshu_mcp.acceptance.report import render_markdown
from tianshu_mcp.acceptance.report_parts import DIFF_MAX_LINES
from tianshu_mcp.acceptance.resolved_cmd import resolve_command
from tianshu_mcp.acceptance.runner import run_check
from tianshu_mcp.adapters.cli import run_cli_agent
from tianshu_mcp.adapters.fatal import agent_output_tail
from tianshu_mcp.adapters.profiles import AgentProfile, resolve_profile
from tianshu_mcp.adapters.round import AgentRunContext
from tianshu_mcp.core.text import CUT_MARK
from tianshu_mcp.tasks.results import RoundResult

from fixture_project import git, make_calc_repo, scripted_profile

CHROMIUM = "/usr/lib/chromium/chromium"
ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"
PREVIOUS_FAIL = "[FAIL] Acceptance failed (round 0): 1 check(s) failed."
EMPTY_BLOB = "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"


def _request(tmp_path: Path, repo: Path, baseline, round_: int = 0, **kw) -> VerifyRequest:
    tid = "tsk_20260101000000_abcdef"
    return VerifyRequest(task_id=tid, project_path=str(repo), task_dir=tmp_path / "home" / "tasks" / tid,
                         round=round_, baseline=baseline, home=tmp_path / "home", verify_command_timeout_ms=120_000,
                         **kw)


def _rework_round(tmp_path: Path) -> tuple[dict, Path]:
    """Round 1 of a task whose round 0 failed: a real CLI agent (scripted_agent.py) gets the rework
    brief quoting round 0's ``[FAIL]`` summary in its argv, fixes ``add`` and adds files; the engine
    verifies the round with the agent's outcome and the brief."""
    repo = make_calc_repo(tmp_path / "calc")
    (repo / "stale.txt").write_text("dirty before the work\n")  # pre-existing, untouched: not the agent's change
    baseline = capture_baseline(str(repo))
    tdir = tmp_path / "home" / "tasks" / "tsk_20260101000000_abcdef"
    tdir.mkdir(parents=True)
    profile = AgentProfile.model_validate(scripted_profile())
    agent = resolve_profile("scripted", profile)
    feedback = (f"{PREVIOUS_FAIL}\n- [FAIL] pytest — exit 1 (120ms)\n"
                "tests/test_calc.py::test_add_negative failed: assert 5 == -5\n" + "context line\n" * 200)
    ctx = AgentRunContext(task_id="tsk_20260101000000_abcdef", project_path=str(repo), task_dir=tdir, round=1,
                          task="Fix the bug in add() in calc.py", context=None, feedback=feedback, timeout_ms=60_000)
    res = run_cli_agent(ctx, agent)
    assert res.ok, res
    (repo / "docs").mkdir()
    (repo / "docs" / "NOTES.md").write_text("# notes\nthe fix\n")
    (repo / "logo.bin").write_bytes(b"\x00\x01\x02binary\x00")
    run = RoundResult(ok=True, exit_code=res.exit_code, duration_ms=res.duration_ms,
                      output_tail=agent_output_tail(res.log_file))
    outcome = verify_round(_request(tmp_path, repo, baseline, 1, agent_run=run.agent_run().model_dump(),
                                    brief_file=tdir / "prompt-1.txt"))
    return outcome.report, repo


def test_a_rework_rounds_report_shows_the_agents_own_output_brief_and_diff(tmp_path: Path) -> None:
    report, repo = _rework_round(tmp_path)
    assert report["round"] == 1 and report["passed"] is True, report["message"]
    log = (Path(report["files"]["json"]).parent / "agent-1.log").read_text()
    assert PREVIOUS_FAIL in log  # our spawn line, quoting the brief, stays in the log file
    tail = report["agent"]["outputTail"]
    assert PREVIOUS_FAIL not in tail and "===== spawn:" not in tail and "[exit] code=" not in tail
    assert "scripted agent" in tail  # the agent's own words
    # the brief is shown as the brief, apart from the agent's output
    assert PREVIOUS_FAIL in report["brief"]["text"] and report["brief"]["file"].endswith("prompt-1.txt")
    md = Path(report["files"]["md"]).read_text()
    agent_md = md.split("## Agent", 1)[1].split("## Brief", 1)[0]
    assert "scripted agent" in agent_md and PREVIOUS_FAIL not in agent_md
    html = Path(report["files"]["html"]).read_text()
    agent_html = html.split('<section id="agent">', 1)[1].split("</section>", 1)[0]
    assert "Exit code" in agent_html and "scripted agent" in agent_html and "[FAIL]" not in agent_html
    assert '<section id="brief">' in html
    # the change's diff: the whole patch beside the report, untracked files as added, binary as git says
    patch = Path(report["files"]["patch"])
    assert patch.name == "report-1.patch" and report["diff"]["file"] == str(patch)
    text = patch.read_text()
    assert "diff --git a/calc.py b/calc.py" in text and "+    return a + b" in text
    assert "diff --git a/docs/NOTES.md b/docs/NOTES.md\nnew file mode 100644" in text
    assert "Binary files /dev/null and b/logo.bin differ" in text
    assert "stale.txt" not in text  # dirty before the work, untouched
    assert report["diff"]["text"] == text and report["diff"]["truncated"] is False
    assert "### Diff" in md and "+    return a + b" in md and str(patch) in md
    assert 'id="diff"' in html and "return a + b" in html
    # nothing was written to the repository on the way
    assert not (repo / ".git" / "objects" / EMPTY_BLOB[:2] / EMPTY_BLOB[2:]).exists()
    status = git(repo, "status", "--porcelain")
    assert " M calc.py" in status and "?? docs/" in status and "?? logo.bin" in status  # nothing staged


def test_a_long_diff_and_brief_are_capped_with_a_note(tmp_path: Path) -> None:
    repo = make_calc_repo(tmp_path / "calc")
    baseline = capture_baseline(str(repo))
    (repo / "big.py").write_text("".join(f"x{i} = {i}\n" for i in range(500)))
    brief = tmp_path / "prompt-0.txt"
    brief.write_text("Do the thing\n" + "more detail\n" * 3000)
    report = verify_round(_request(tmp_path, repo, baseline, brief_file=brief)).report
    d = report["diff"]
    assert d["truncated"] is True and d["shownLines"] == DIFF_MAX_LINES and d["lines"] > 500
    assert len(Path(d["file"]).read_text().splitlines()) == d["lines"]  # the file has it all
    md = Path(report["files"]["md"]).read_text()
    assert f"the first {DIFF_MAX_LINES} of {d['lines']} lines are shown" in md
    b = report["brief"]
    assert b["truncated"] is True and b["chars"] == len(brief.read_text()) and len(b["text"]) <= 12_000
    assert b["text"].endswith("\n") and "characters are shown" in md


def _other_env_pytest(tmp_path: Path) -> Path:
    """A ``pytest`` console script of another environment (the newcomer's first run): its ``#!``
    names this interpreter."""
    bindir = tmp_path / "other-env" / "bin"
    bindir.mkdir(parents=True)
    script = bindir / "pytest"
    script.write_text(f"#!{sys.executable}\nimport sys\nfrom pytest import console_main\nsys.exit(console_main())\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def test_each_check_shows_the_program_that_ran(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    script = _other_env_pytest(tmp_path)
    monkeypatch.setenv("PATH", f"{script.parent}{os.pathsep}{os.environ['PATH']}")
    repo = make_calc_repo(tmp_path / "calc", checks=[{"name": "pytest", "cmd": ["pytest", "-q", "-p", "no:cacheprovider"]}])
    report = verify_round(_request(tmp_path, repo, capture_baseline(str(repo)))).report
    check = next(c for c in report["checks"] if c["name"] == "pytest")
    import pytest as pytest_module

    assert check["cmd"] == "pytest -q -p no:cacheprovider"  # as configured
    assert check["resolved"] == {"path": str(script), "interpreter": sys.executable,
                                 "version": f"pytest {pytest_module.__version__}"}  # as it ran
    saved = json.loads(Path(report["files"]["json"]).read_text())
    assert next(c for c in saved["checks"] if c["name"] == "pytest")["resolved"] == check["resolved"]
    md = Path(report["files"]["md"]).read_text()
    assert f"ran `{script} (pytest {pytest_module.__version__}; #! {sys.executable})`" in md
    html = Path(report["files"]["html"]).read_text()
    assert f"ran: {script}" in html and f"#! {sys.executable}" in html
    # the project's own environment comes first, the way the runner puts it on PATH
    venv_bin = repo / ".venv" / "bin"
    venv_bin.mkdir(parents=True)
    own = venv_bin / "pytest"
    shutil.copy(script, own)
    from tianshu_mcp.acceptance.runner import check_env

    resolved = resolve_command("pytest", repo, check_env(repo))
    assert resolved is not None and resolved.path == str(own)


def test_a_well_known_binary_tool_gets_its_version_line(tmp_path: Path) -> None:
    node = shutil.which("node")
    if node is None:
        pytest.skip("no node on PATH")
    r = resolve_command("node", tmp_path, dict(os.environ))
    assert r is not None and r.path == node and r.interpreter is None
    assert r.version is not None and re.fullmatch(r"node v\d+\.\d+\.\d+", r.version)
    assert resolve_command("no-such-tool-xyz", tmp_path, dict(os.environ)) is None


PARAMETRIZED = '''import pytest


@pytest.mark.parametrize("value", ["a", "b", "c"])
def test_is_z(value):
    assert value == "z"


def test_other():
    assert 1 == 2
'''


def test_a_parametrized_failure_is_one_directive_with_its_cases(tmp_path: Path) -> None:
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "test_param.py").write_text(PARAMETRIZED)
    check = run_check(CheckDef.make("tests", [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]), proj,
                      tmp_path / "verify-0.log", 60_000)
    assert check["passed"] is False and check["tests"]["failed"] == 4
    report = {"round": 0, "projectPath": str(proj), "passed": False, "verdict": "failed", "checks": [check],
              "analysis": {}, "message": "failed"}
    items = extract_directives(report)["items"]
    at_5 = [i for i in items if i.get("file") == "test_param.py" and i.get("line") == 6]
    assert len(at_5) == 1, items  # one directive for the location, not one per case
    folded = at_5[0]
    assert folded["cases"] == [f"test_param.py::test_is_z[{c}]" for c in "abc"]
    assert "3 cases: test_is_z[a], test_is_z[b], test_is_z[c]" in folded["issue"]
    assert "test_param.py::test_is_z failed" in folded["issue"] and "[a]" not in folded["action"]
    assert any("test_other" in i["issue"] and "cases" not in i for i in items)
    report["repairDirectives"] = {"items": items}
    assert render_markdown(report).count("test_is_z failed") == 1
    assert render_html(report).count("test_is_z failed") == 1


def _realistic_failing_report(tmp_path: Path) -> Path:
    """A failed round with long paths, a long command, a long output tail, parametrized failures,
    a diff and an agent section: the HTML page a newcomer opens."""
    noisy = ("import sys\nfor i in range(300):\n    print(f'src/module_{i}.py:{i}: warning: a long lint message "
             "about this line of the module')\nsys.exit(1)\n")
    repo = make_calc_repo(tmp_path / ("a-rather-long-project-directory-name-" * 3) / "calc", checks=[
        {"name": "pytest", "cmd": [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]},
        {"name": "lint", "cmd": [sys.executable, "-c", noisy]}])
    (repo / "tests" / "test_param.py").write_text(PARAMETRIZED.replace("assert value", "assert value + '_" + "x" * 150
                                                                       + "'"))
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "param tests")
    baseline = capture_baseline(str(repo))
    (repo / "calc.py").write_text("def add(a, b):\n    return abs(a) + abs(b)\n")
    deep = repo / "src" / "a_very_long_package_name_that_goes_on" / "and_a_module_with_an_equally_long_name"
    deep.mkdir(parents=True)
    (deep / "generated_helpers_for_the_calculator_with_a_long_file_name.py").write_text("x = 1\n" * 40)
    tdir = tmp_path / "home" / "tasks" / "tsk_20260101000000_abcdef"
    tdir.mkdir(parents=True)
    brief = tdir / "prompt-0.txt"
    brief.write_text("Fix the bug in add() in calc.py\n")
    output = "".join(f"step {i}: edited calc.py and re-ran the tests with a long explanation of why\n" for i in range(60))
    agent_run = {"exitCode": 0, "durationMs": 8123, "outputTail": output[-2000:], "toolCalls": 7,
                 "finalMessage": "I fixed add() in calc.py; all tests pass now."}
    report = verify_round(_request(tmp_path, repo, baseline, agent_run=agent_run, brief_file=brief)).report
    assert report["passed"] is False
    return Path(report["files"]["html"])


def test_the_html_report_fits_a_1400px_window(tmp_path: Path) -> None:
    playwright = pytest.importorskip("playwright.sync_api")
    html_file = _realistic_failing_report(tmp_path)
    html = html_file.read_text()
    assert '<section id="agent">' in html and "3 cases:" in html
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.goto(html_file.as_uri())
            width = page.evaluate("document.documentElement.scrollWidth")
            assert width <= 1400, width
            tables = page.evaluate("""() => [...document.querySelectorAll('table')].map(t => ({
                head: t.tHead ? t.tHead.rows[0].cells.length : null,
                rows: [...t.tBodies[0].rows].map(r => r.cells.length),
                fits: t.getBoundingClientRect().right <= document.documentElement.clientWidth}))""")
            assert tables
            for t in tables:
                assert t["fits"], t
                if t["head"] is not None:
                    assert all(n == t["head"] for n in t["rows"]), t
            # each diffstat number sits under its own header
            spots = page.evaluate("""() => {
                const t = [...document.querySelectorAll('#changes table')][0];
                const heads = [...t.tHead.rows[0].cells].map(c => c.getBoundingClientRect());
                return [...t.tBodies[0].rows].filter(r => r.cells[1].textContent).map(r => [1, 2].map(i => {
                    const c = r.cells[i].querySelector('span').getBoundingClientRect(), h = heads[i];
                    return c.left >= h.left - 1 && c.right <= h.right + 1; })).flat(); }""")
            assert spots and all(spots), spots
            # output tails start at a line, never mid-word
            agent_lines = page.evaluate("document.querySelector('#agent pre').textContent.split('\\n')")
            assert agent_lines[0] == CUT_MARK and agent_lines[1].startswith("step "), agent_lines[:2]
            check_lines = page.evaluate("""[...document.querySelectorAll('#checks details')]
                .find(d => d.querySelector('summary').textContent.includes('lint'))
                .querySelector('pre').textContent.split('\\n')""")
            assert check_lines[0] == CUT_MARK, check_lines[:2]  # the 4,000-character tail was cut: from a line
            ARTIFACTS.mkdir(exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "report-1400.png"), full_page=True)
        finally:
            browser.close()


def test_the_html_report_has_the_integrity_section_and_links_its_patch() -> None:
    # a tester found the policy and the targets' verdicts in report-1.md but nowhere in report-1.html
    from tianshu_mcp.acceptance.html_report import render_html
    from tianshu_mcp.acceptance.report import render_markdown

    report = {"round": 1, "taskId": "tsk_x", "projectPath": "/p", "passed": False, "verdict": "failed", "message": "m",
              "checks": [], "integrity": {"policy": "protect", "notes": ["<b>not markup</b>"],
                                          "targets": [{"target": "tests/test_a.py::test_b", "source": "brief",
                                                       "status": "failed", "where": "agent"}]},
              "analysis": {"changedFiles": ["a.py"], "diffstat": {"totalAdd": 1, "totalDel": 0,
                                                                  "perFile": [{"file": "a.py", "add": 1, "del": 0}]}},
              "diff": {"file": "/t/report-1.patch", "lines": 3, "bytes": 40, "text": "+x\n"}}
    page = render_html(report)
    md = render_markdown(report)
    assert '<section id="integrity">' in page and "Policy: <code>protect</code>" in page
    assert "Target <code>tests/test_a.py::test_b</code> (brief): failed on the agent tree" in page
    assert "&lt;b&gt;not markup&lt;/b&gt;" in page and "<b>not markup</b>" not in page
    assert "## Verification integrity" in md and "Policy: `protect`" in md
    assert '<a href="report-1.patch"><code>/t/report-1.patch</code></a>' in page
