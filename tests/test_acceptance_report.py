"""acceptance.report / acceptance.html_report: report-N.md, report-N.json, report-N.html (docs/acceptance.md
§8.8).

Synthetic report dicts with every section present; the HTML must be self-contained and escaped.
"""

from __future__ import annotations

import copy
import json
import re
from html.parser import HTMLParser
from pathlib import Path

from tianshu_mcp.acceptance.html_report import render_html
from tianshu_mcp.acceptance.report import REPORT_KEY_ORDER, render_markdown, summarize_report, write_report

EVIL = "<script>alert('x')</script>"


def full_report() -> dict:
    return {
        "round": 3,
        "taskId": "tsk_20260101000000_abcdef",
        "projectPath": "/work/proj <demo>",
        "startedAt": "2026-01-01T00:00:00.000Z",
        "finishedAt": "2026-01-01T00:01:00.000Z",
        "passed": False,
        "verdict": "failed",
        "checks": [
            {"name": "git-diff-check", "cmd": "git diff --check (base=abcdef1)", "passed": True, "durationMs": 12,
             "exitCode": 0, "outputTail": "", "timeout": False, "aborted": False},
            {"name": "pytest", "cmd": "pytest -q", "passed": False, "durationMs": 2345, "exitCode": 1,
             "outputTail": f"FAILED tests/test_a.py::test_x - assert 1 == 2\n{EVIL}\n1 failed, 2 passed",
             "timeout": False, "aborted": False, "baseline": "regression",
             "tests": {"runner": "pytest", "passed": 2, "failed": 1, "skipped": 0, "errors": 0, "total": 3,
                       "failedIds": ["tests/test_a.py::test_x", "tests/test_<b>.py::test_y"]}},
            {"name": "lint", "cmd": "ruff check .", "passed": False, "durationMs": 300000, "exitCode": None,
             "outputTail": "still running", "timeout": True, "aborted": False, "optional": True},
            {"name": "build", "cmd": "skip : later", "passed": True, "durationMs": 0, "exitCode": None,
             "outputTail": "", "timeout": False, "skipped": True, "reason": "explicit skip command"},
        ],
        "analysis": {
            "changedFiles": ["src/new name.py", "calc.py", "libs/sm"],
            "untrackedFiles": ["tests/test_new.py"],
            "diffstat": {"totalAdd": 12, "totalDel": 3, "perFile": [
                {"file": "src/new name.py", "add": 1, "del": 0},
                {"file": "calc.py", "add": 5, "del": 3},
                {"file": "logo.png", "add": 0, "del": 0, "binary": True},
                {"file": "tests/test_new.py", "add": 6, "del": 0},
            ]},
            "signals": {"todo": 1, "consoleDebug": 0, "commentedBlock": 0, "secretLike": 0, "debugLeftover": 2,
                        "skippedOrOnlyTests": 1, "deletedTests": 0, "weakenedTests": 2, "acceptanceTampering": 1},
            "bigFileChanges": [],
            "warnings": ["Lockfile modified: poetry.lock (confirm the dependency change is intended)"],
            "notes": ["The agent created git commit(s) during the task; nothing is lost."],
            "renames": [{"from": "src/old name.py", "to": "src/new name.py", "similarity": 92}],
            "submodules": [{"path": "libs/sm", "before": "a" * 40, "after": "b" * 40}],
            "tampering": [
                {"kind": "skippedOrOnlyTests", "file": "tests/test_a.py", "detail": "focused/skipped test added: `@pytest.mark.skip`"},
                {"kind": "weakenedTests", "file": "tests/test_a.py", "detail": f"2 assertion(s) removed, e.g. `{EVIL}`"},
                {"kind": "acceptanceTampering", "file": ".tianshu-mcp/acceptance.json", "detail": "acceptance configuration edited"},
            ],
        },
        "files": {},
        "message": "Failed checks: pytest; suspicious markers present, review the report.",
        "blockingIssues": [{"code": "CHECK_NOT_RUNNABLE", "message": "check 'x' cannot start"}],
        "repairDirectives": {
            "items": [
                {"file": "tests/test_a.py", "line": 7, "issue": "test_x failed", "action": "fix calc.add", "source": "pytest"},
                {"issue": "TODO markers added", "action": "remove them", "source": "diffstat"},
            ],
            "sources": ["pytest", "diffstat"],
        },
        "baselineGrading": {
            "enabled": True,
            "policy": "tolerate-untargeted",
            "checks": [
                {"name": "pytest", "before": "passed", "after": "failed", "classification": "regression"},
                {"name": "lint", "before": "failed", "after": "failed", "classification": "still_failing",
                 "counted": False, "note": "every failing test already failed at baseline"},
            ],
            "tests": [
                {"check": "pytest", "id": "tests/test_a.py::test_x", "classification": "regression"},
                {"check": "pytest", "id": "tests/test_a.py::test_ok", "classification": "passing"},
                {"check": "pytest", "id": "tests/test_a.py::test_fixed", "classification": "fixed"},
                {"check": "pytest", "id": "tests/test_new.py::test_n", "classification": "new_failure"},
            ],
            "notes": ["baseline reproduced from the stored state"],
        },
        "visual": {"results": [{"id": "home", "viewport": "desktop", "status": "failed", "code": "PIXEL_DIFF",
                                "message": "3.2% pixels differ"}], "artifactDirectory": "/h/visual/3", "artifactBytes": 10},
    }


class StrictParser(HTMLParser):
    """Records tag balance problems (html.parser itself never raises)."""

    VOID = {"meta", "br", "hr", "img", "input", "link", "col", "area", "base", "wbr", "source"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.errors: list[str] = []
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, attrs))
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"unexpected </{tag}> (open: {self.stack[-3:]})")
            return
        self.stack.pop()

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def parse(doc: str) -> StrictParser:
    p = StrictParser()
    p.feed(doc)
    p.close()
    return p


# --- HTML ---------------------------------------------------------------------------------------


def test_html_is_self_contained_and_well_formed() -> None:
    doc = render_html(full_report())
    assert doc.startswith("<!DOCTYPE html>")
    assert "http://" not in doc and "https://" not in doc
    assert not re.search(r"\bsrc\s*=", doc) and "<script" not in doc and "<link" not in doc and "url(" not in doc
    p = parse(doc)
    assert p.errors == [] and p.stack == []
    assert any(tag == "style" for tag, _ in p.tags)


def test_html_escapes_everything() -> None:
    doc = render_html(full_report())
    assert EVIL not in doc
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in doc  # output tail and tampering detail
    assert "/work/proj &lt;demo&gt;" in doc and "tests/test_&lt;b&gt;.py::test_y" in doc
    text = "".join(parse(doc).text)
    assert EVIL in text  # shown to the reader as text


def test_html_has_every_section() -> None:
    doc = render_html(full_report())
    for section in ("checks", "baseline", "changes", "signals", "tampering", "directives", "visual", "blocking"):
        assert f'id="{section}"' in doc, section
    # checks table with badges, timings, collapsible output tails, test counts
    assert '<span class="badge pass">PASS</span>' in doc
    assert '<span class="badge fail">FAIL</span>' in doc
    assert '<span class="badge skip">SKIP</span>' in doc
    assert "2345 ms" in doc and "timed out" in doc and "optional" in doc
    assert doc.count("<details") >= 3 and "<details open><summary>" in doc  # the failing mandatory check is open
    assert "pytest: 2 passed, 1 failed, 0 skipped, 0 errors (3 total)" in doc
    assert "failed tests (2)" in doc
    # baseline classification
    assert "tolerate-untargeted" in doc and 'class="badge regression">regression' in doc
    assert 'class="badge still_failing">still_failing' in doc and "tests/test_new.py::test_n" in doc
    assert 'class="badge skip">not counted</span> every failing test already failed at baseline' in doc
    assert "baseline reproduced from the stored state" in doc
    # changes, renames, submodules
    assert "renamed from <code>src/old name.py</code> (92%)" in doc
    assert "b" * 40 in doc and "Submodules (not descended into)" in doc
    assert 'class="badge info">binary' in doc and 'class="badge skip">untracked' in doc
    # signals and tampering highlighted
    assert '<section id="tampering" class="tamper">' in doc
    assert "focused or skipped tests added" in doc and ".tianshu-mcp/acceptance.json" in doc
    assert "debug leftovers" in doc and "TODO/FIXME/HACK hits" in doc
    # directives and visual
    assert "<code>tests/test_a.py:7</code>" in doc and "(no specific file)" in doc
    assert "PIXEL_DIFF" in doc and "3.2% pixels differ" in doc


def test_html_minimal_report_and_no_tampering() -> None:
    r = {"round": 0, "taskId": "t", "projectPath": "/p", "startedAt": "s", "finishedAt": "f", "passed": True,
         "verdict": "passed", "checks": [], "analysis": {}, "files": {}, "message": "Acceptance passed."}
    doc = render_html(r)
    p = parse(doc)
    assert p.errors == [] and p.stack == []
    assert "(no runnable checks)" in doc and "No agent tampering signals." in doc and 'class="tamper"' not in doc
    assert "No changed files" in doc and 'id="baseline"' not in doc and 'id="visual"' not in doc
    assert "this round&#x27;s report has no structured directives" in doc


def test_html_disabled_baseline_grading_is_not_rendered() -> None:
    r = full_report()
    r["baselineGrading"] = {"enabled": False}
    assert 'id="baseline"' not in render_html(r)


# --- markdown -------------------------------------------------------------------------------------


def test_markdown_lists_each_section() -> None:
    md = render_markdown(full_report())
    headings = [ln for ln in md.splitlines() if ln.startswith("#")]
    assert headings == [
        "# Acceptance report — round 3",
        "## Command checks",
        "## Baseline comparison",
        "### Tests",
        "## Code analysis",
        "### Changed files (3 tracked + 1 untracked)",
        "### Renames",
        "### Submodules (not descended into)",
        "### diffstat: +12 -3",
        "### Suspicious markers and warnings",
        "### Agent tampering signals",
        "## Structured repair directives",
    ]
    assert "- [BLOCKED] CHECK_NOT_RUNNABLE: check 'x' cannot start" in md
    # checks: status, timing, tests, output tail
    assert "- [FAIL] pytest — `pytest -q` (2345ms) [baseline: regression]" in md
    assert "  - Tests (pytest): 2 passed, 1 failed, 0 skipped, 0 errors (3 total)" in md
    assert "  - Failed tests: `tests/test_a.py::test_x`, `tests/test_<b>.py::test_y`" in md
    assert "    FAILED tests/test_a.py::test_x - assert 1 == 2" in md
    assert "- [FAIL] lint — `ruff check .` (300000ms) — optional (does not affect the verdict)" in md
    assert "  - [WARN] timed out (300000ms)" in md
    assert "- [SKIP] build — `skip : later` (0ms) — explicit skip command" in md
    # baseline
    assert "- Policy: `tolerate-untargeted`" in md
    assert "- [REGRESSION] check pytest: passed → failed" in md
    assert (
        "- [STILL_FAILING] check lint: failed → failed — not counted; every failing test already failed at baseline" in md
    )
    assert "- regression: 1, new_failure: 1, fixed: 1, passing: 1" in md
    tests_block = md.split("### Tests")[1].split("## Code analysis")[0]
    assert tests_block.index("[REGRESSION] pytest: `tests/test_a.py::test_x`") < tests_block.index("[NEW_FAILURE]")
    assert tests_block.index("[NEW_FAILURE]") < tests_block.index("[FIXED]")
    assert "test_ok" not in tests_block  # passing tests are only counted
    assert "- [INFO] baseline reproduced from the stored state" in md
    # changes
    assert "- src/old name.py → src/new name.py (similarity 92%)" in md
    assert f"- libs/sm: {'a' * 12} → {'b' * 12}" in md
    assert "- logo.png: +0 -0 (binary)" in md and "- (untracked) tests/test_new.py" in md
    # signals, tampering highlighted
    assert "- TODO/FIXME/HACK hits: 1" in md and "- debug leftovers (breakpoint/pdb/stray print/debugger): 2" in md
    assert "- **focused or skipped tests added: 1**" in md and "- **tests weakened (assertions removed or trivially true): 2**" in md
    assert "- [TAMPER] acceptanceTampering — `.tianshu-mcp/acceptance.json`: acceptance configuration edited" in md
    assert "tests deleted" not in md  # zero counts are not listed
    # directives
    assert "- `tests/test_a.py:7` — test_x failed → fix calc.add (source pytest)" in md
    assert "- (no specific file) — TODO markers added → remove them (source diffstat)" in md
    assert md.rstrip().endswith("Failed checks: pytest; suspicious markers present, review the report.")


def test_markdown_not_counted_check_and_no_grading() -> None:
    r = full_report()
    del r["baselineGrading"]
    r["checks"][1]["notCounted"] = True
    md = render_markdown(r)
    assert "## Baseline comparison" not in md
    assert "- [FAIL] pytest — `pytest -q` (2345ms) — not counted (already failing at the baseline) [baseline: regression]" in md


def test_markdown_submodule_only_change() -> None:
    r = full_report()
    r["analysis"] = {"changedFiles": [], "untrackedFiles": [], "diffstat": {"totalAdd": 0, "totalDel": 0, "perFile": []},
                     "signals": {}, "submodules": [{"path": "vendor/inner", "before": None, "after": None}]}
    md = render_markdown(r)
    assert "No changed files" not in md and "- vendor/inner: none → none" in md
    assert "### Agent tampering signals" not in md


# --- files and summary ----------------------------------------------------------------------------


def test_write_report_writes_md_json_html(tmp_path: Path) -> None:
    report = full_report()
    md_path, json_path = write_report(tmp_path / "task", report)
    html_path = tmp_path / "task" / "report-3.html"
    assert md_path == (tmp_path / "task" / "report-3.md").absolute() and json_path.name == "report-3.json"
    assert report["files"] == {"md": str(md_path), "json": str(json_path), "html": str(html_path.absolute())}
    data = json.loads(json_path.read_text())
    assert list(data["files"]) == ["md", "json", "html"]
    assert list(data)[:11] == list(REPORT_KEY_ORDER[:11])
    doc = html_path.read_text(encoding="utf-8")
    assert doc.startswith("<!DOCTYPE html>") and str(json_path) in doc
    assert md_path.read_text().startswith("# Acceptance report — round 3")
    assert not list((tmp_path / "task").glob("*.tmp"))


def test_write_report_keeps_visual_html_fragment(tmp_path: Path) -> None:
    report = copy.deepcopy(full_report())
    write_report(tmp_path, report, visual_section="## Visual", visual_html='<article data-status="failed">v</article>')
    doc = Path(report["files"]["html"]).read_text()
    assert '<article data-status="failed">v</article>' in doc


def test_summary_mentions_tests_tampering_and_html(tmp_path: Path) -> None:
    report = full_report()
    write_report(tmp_path, report)
    s = summarize_report(report)
    assert s.startswith("[FAIL] Acceptance failed (round 3): 2 check(s) failed, 1 skipped.")
    assert "- [FAIL] pytest — exit 1 (2345ms) — tests: 2 passed, 1 failed, 0 skipped, 0 errors (3 total)" in s
    assert "Agent tampering signals: skippedOrOnlyTests 1, weakenedTests 2, acceptanceTampering 1 (see the report)." in s
    assert s.endswith(f"HTML: {report['files']['html']}")
