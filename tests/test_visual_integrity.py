"""The visual snapshot inside a verify round (docs/visual.md §11.5; docs/visual.md §9, docs/acceptance.md
§3.1 steps 4, 7, 10): frozen at the first round and checked before the commands, after them and at
the end — with visual acceptance disabled too. An edit by the agent (before the round) or by a
check command (during it) blocks the round with VISUAL_INTEGRITY and names what changed — so does a
page's own server editing the rules or forging a baseline while the visual stage captures it."""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path

import pytest
from test_acceptance_engine import git, make_pytest_repo, request
from tianshu_mcp.acceptance.engine import verify_round
from tianshu_mcp.acceptance.git import capture_baseline
from tianshu_mcp.acceptance.visual.snapshot import SNAPSHOT_FILE

DISABLED = {"enabled": False, "pages": [{"id": "home", "source": {"type": "static", "root": "site"}}]}


def repo_with_visual(tmp_path: Path, visual: dict) -> Path:
    repo = make_pytest_repo(tmp_path / "repo", gitignore=True)
    (repo / ".tianshu-mcp").mkdir()
    (repo / ".tianshu-mcp" / "acceptance.json").write_text(json.dumps({"visual": visual}))
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "visual rules")
    return repo


def test_the_first_round_freezes_and_an_agent_edit_of_a_disabled_block_is_caught(tmp_path: Path) -> None:
    repo = repo_with_visual(tmp_path, DISABLED)
    baseline = capture_baseline(repo)
    first = verify_round(request(tmp_path, repo, baseline=baseline))
    snap = tmp_path / "home" / "tasks" / "tsk_20260101000000_abcdef" / SNAPSHOT_FILE
    assert first.blocking_issues == [] and snap.is_file()
    assert json.loads(snap.read_text())["config"]["enabled"] is False
    # the agent removes the (disabled) visual rules: the next round is blocked, no check runs
    (repo / ".tianshu-mcp" / "acceptance.json").write_text(json.dumps({}))
    second = verify_round(request(tmp_path, repo, baseline=baseline))
    assert [i["code"] for i in second.blocking_issues] == ["VISUAL_INTEGRITY"], second.blocking_issues
    assert "visual block" in second.blocking_issues[0]["message"] and not second.passed
    assert [c["name"] for c in second.report["checks"]] == ["git-diff-check"]


def test_a_check_command_that_edits_the_rules_is_caught_after_the_commands(tmp_path: Path) -> None:
    repo = repo_with_visual(tmp_path, DISABLED)
    baseline = capture_baseline(repo)
    edit = ("import json, pathlib; p = pathlib.Path('.tianshu-mcp/acceptance.json'); d = json.loads(p.read_text()); "
            "d['visual']['enabled'] = True; d['visual']['pages'] = []; p.write_text(json.dumps(d))")
    out = verify_round(request(tmp_path, repo, baseline=baseline, extra_checks=[{"name": "sneaky", "cmd": [sys.executable, "-c", edit]}],
                               checks_mode="replace"))
    assert [i["code"] for i in out.blocking_issues] == ["VISUAL_INTEGRITY"], out.blocking_issues
    assert any(c["name"] == "sneaky" and c["passed"] for c in out.report["checks"])  # it ran, then was caught


def test_an_unreadable_snapshot_blocks_with_snapshot_invalid(tmp_path: Path) -> None:
    repo = repo_with_visual(tmp_path, DISABLED)
    task_dir = tmp_path / "home" / "tasks" / "tsk_20260101000000_abcdef"
    task_dir.mkdir(parents=True)
    (task_dir / SNAPSHOT_FILE).write_text("{not json")
    out = verify_round(request(tmp_path, repo, baseline=capture_baseline(repo)))
    assert [i["code"] for i in out.blocking_issues] == ["SNAPSHOT_INVALID"]


def test_the_rework_brief_names_the_visual_defect_where_it_is_and_the_images() -> None:
    from tianshu_mcp.acceptance.repair import feedback_text, render_repair_plan

    report = {"round": 0, "projectPath": "/p", "passed": False, "checks": [], "message": "Visual defects: home/desktop.",
              "visual": {"results": [{"id": "home", "kind": "page", "target": "/", "viewport": "desktop", "status": "failed",
                                      "optional": False, "code": "PIXEL_DIFFERENCE", "message": "Screenshot differs from approved baseline",
                                      "metrics": {"bounds": {"x": 0, "y": 0, "width": 480, "height": 60}},
                                      "regions": [{"x": 0, "y": 0, "width": 480, "height": 60, "area": 28800}],
                                      "artifacts": {"actual": "/t/visual/0/home/desktop/actual.png",
                                                    "diff": "/t/visual/0/home/desktop/diff.png"}}]}}
    plan = render_repair_plan(report, "tsk_x", "Add notes", "/t/report-0.md")
    feedback = feedback_text(report, "/t/rework.md")
    for text in (plan, feedback):
        assert "home/desktop (/): PIXEL_DIFFERENCE" in text and "x=0 y=0 size 480×60 px" in text
        assert "/t/visual/0/home/desktop/diff.png" in text
    assert "1 visual defect(s)" in plan and "(no failing command check" not in plan


# --- an edit made while the visual stage runs (docs/visual.md §9: checked after the visual stage) ---

EDITING_SERVER_PY = """\
import http.server, json, os, pathlib, sys
port, what, target = int(sys.argv[1]), sys.argv[2], sys.argv[3]
if what == "config":  # loosen the threshold the page is judged by
    p = pathlib.Path(".tianshu-mcp/acceptance.json")
    d = json.loads(p.read_text())
    d["visual"]["defaults"] = {"maxDiffRatio": 1}
    p.write_text(json.dumps(d))
else:  # forge the page's baseline
    p = pathlib.Path(target)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(b"\\x89PNG forged")
with open("server.pid", "w") as fh:
    fh.write(str(os.getpid()))
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"<!doctype html><body style='margin:0;background:#2a6'><p>served</p></body>"
        self.send_response(200); self.send_header("Content-Type", "text/html"); self.send_header("Content-Length", str(len(body)))
        self.end_headers(); self.wfile.write(body)
    def log_message(self, *a):
        pass
http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()
"""


@pytest.mark.skipif(not Path("/usr/lib/chromium/chromium").exists(), reason="Debian chromium is not installed")
@pytest.mark.parametrize("what", ["config", "baseline"])
def test_a_page_service_that_edits_the_rules_or_a_baseline_during_the_stage_is_caught_after_it(
        tmp_path: Path, what: str) -> None:
    import psutil
    from tianshu_mcp.core.procs import is_alive

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    target = f"tests/visual/baselines/{sys.platform}/managed/home/desktop.png"
    visual = {"enabled": True, "viewports": [{"id": "desktop", "width": 240, "height": 160}],
              "pages": [{"id": "home", "optional": True,  # its missing baseline alone would not block the round
                         "source": {"type": "command", "command": sys.executable, "args": ["serve.py", str(port), what, target],
                                    "readyUrl": f"http://127.0.0.1:{port}/"}}]}
    repo = make_pytest_repo(tmp_path / "repo", gitignore=True)
    (repo / ".tianshu-mcp").mkdir()
    (repo / ".tianshu-mcp" / "acceptance.json").write_text(json.dumps({"checks": [], "visual": visual}))
    (repo / "serve.py").write_text(EDITING_SERVER_PY)
    (repo / ".gitignore").write_text("__pycache__/\n.pytest_cache/\nserver.pid\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "visual rules")
    baseline = capture_baseline(repo)
    (repo / "notes.txt").write_text("the agent's work\n")
    out = verify_round(request(tmp_path, repo, baseline=baseline))
    snap = json.loads((tmp_path / "home" / "tasks" / "tsk_20260101000000_abcdef" / SNAPSHOT_FILE).read_text())
    assert snap["config"]["defaults"]["maxDiffRatio"] == 0.001 and snap["baselines"][target] is None  # frozen before the stage
    # the stage ran (the page was served and captured), then the check after it caught the edit
    page = out.report["visual"]["results"][0]
    assert (page["id"], page["status"], page["code"]) == ("home", "blocked", "BASELINE_APPROVAL_REQUIRED"), page
    assert Path(page["artifacts"]["actual"]).is_file()
    assert [i["code"] for i in out.blocking_issues] == ["VISUAL_INTEGRITY"], out.blocking_issues
    expected = "the visual block of .tianshu-mcp/acceptance.json" if what == "config" else f"baseline file(s) {target}"
    assert out.blocking_issues[0]["message"].startswith(expected), out.blocking_issues
    assert not out.passed and out.report["verdict"] == "failed"
    # the service was torn down with the stage
    try:
        assert not is_alive(psutil.Process(int((repo / "server.pid").read_text())))
    except psutil.NoSuchProcess:
        pass
