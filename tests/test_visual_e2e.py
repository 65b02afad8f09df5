"""Visual acceptance end to end through the MCP client (docs/visual.md §11.4, §11.5 and §11.9): a static
fixture site served by the engine, real headless Chromium, baselines prepared and approved with the
two visual tools, the scripted agent breaking and repairing the page.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any, Self

import psutil
import pytest
from conftest import add_scripted_profile, mcp_client, meta_of, text_of
from fixture_project import commit_new_repo, git
from tianshu_mcp.core.procs import is_alive

pytestmark = [pytest.mark.anyio]

BANNER_H = 60
INDEX = f"""<!doctype html>
<html><head><meta charset="utf-8"><link rel="stylesheet" href="style.css"><title>fixture</title></head>
<body><div class="banner">Release board</div><main><h1>Builds</h1><p>All green.</p>
<input value="caret here" autofocus><p>Updated <span class="clock">12:00:07</span></p></main></body></html>
"""
STYLE = f"""body {{ margin: 0; font-family: sans-serif; background: #fff; }}
.banner {{ height: {BANNER_H}px; background: #2a6; color: #fff; font-size: 24px; }}
main {{ padding: 16px; }}
"""
VISUAL = {"enabled": True, "viewports": [{"id": "desktop", "width": 480, "height": 320}],
          "pages": [{"id": "home", "source": {"type": "static", "root": "site"}, "route": "/", "maskSelectors": [".clock"]}]}


def make_site_repo(path: Path) -> Path:
    """A git project whose only acceptance is the visual page ``home`` of ``site/``."""
    (path / "site").mkdir(parents=True)
    (path / "site" / "index.html").write_text(INDEX)
    (path / "site" / "style.css").write_text(STYLE)
    (path / ".tianshu-mcp").mkdir()
    (path / ".tianshu-mcp" / "acceptance.json").write_text(json.dumps({"checks": [], "visual": VISUAL}, indent=2))
    return commit_new_repo(path, "site")


def _browserish(proc: psutil.Process) -> bool:
    argv = " ".join(proc.info["cmdline"] or [])
    return "chrom" in (proc.info["name"] or "") or "chromium" in argv or "playwright" in argv


class BrowserWatch:
    """Watches, in a thread while a task runs, the Chromium and Playwright driver processes that a
    tianshu-mcp process of ``home`` starts (those carrying ``TIANSHU_MCP_HOME=home``, this test's
    descendants, and their descendants), and the browser profiles (``--user-data-dir``) they use."""

    def __init__(self, home: Path) -> None:
        self.home, self.since = str(home), time.time()
        self.procs: dict[int, tuple[psutil.Process, str]] = {}
        self.profiles: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _scan(self) -> None:
        mine = {p.pid for p in psutil.Process().children(recursive=True)}
        for proc in psutil.process_iter(["pid", "name", "cmdline", "create_time"]):
            try:
                if proc.info["create_time"] < self.since - 1 or not _browserish(proc):
                    continue
                if proc.pid in mine or proc.pid in self.procs or proc.environ().get("TIANSHU_MCP_HOME") == self.home:
                    for p in [proc, *proc.children(recursive=True)]:
                        self.procs.setdefault(p.pid, (p, p.name()))
                        self.profiles.update(a.split("=", 1)[1] for a in p.cmdline() if a.startswith("--user-data-dir="))
            except (psutil.Error, OSError):
                continue

    def _run(self) -> None:
        while not self._stop.is_set():
            self._scan()
            self._stop.wait(0.1)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def names(self) -> set[str]:
        return {name for _p, name in self.procs.values()}

    def leftovers(self, timeout_s: float = 20) -> list[tuple[int, str]]:
        """Watched processes still alive, or any process naming a watched profile, polled until none
        is left or ``timeout_s`` passes."""
        deadline = time.monotonic() + timeout_s
        while True:
            left = {p.pid: name for p, name in self.procs.values() if is_alive(p)}
            for proc in psutil.process_iter(["pid", "name", "cmdline"]):
                try:
                    if any(prof in " ".join(proc.info["cmdline"] or []) for prof in self.profiles) and is_alive(proc):
                        left[proc.pid] = proc.info["name"]
                except psutil.Error:
                    continue
            if not left or time.monotonic() > deadline:
                return sorted(left.items())
            time.sleep(0.2)


async def approve_baselines(client: Any, repo: Path, task_id: str | None = None) -> dict[str, Any]:
    """prepare_visual_baseline + approve_visual_baseline; returns the approval's meta."""
    prep = await client.call_tool("prepare_visual_baseline", {"projectPath": str(repo)})
    assert not prep.is_error, text_of(prep)
    cand = meta_of(prep)
    assert Path(cand["preview"]).is_file() and len(cand["entries"]) == 1
    args = {"candidateId": cand["candidateId"], "expectedDigest": cand["digest"], "approvalNote": "reviewed: the green banner"}
    if task_id:
        args["taskId"] = task_id
    done = await client.call_tool("approve_visual_baseline", args)
    assert not done.is_error, text_of(done)
    return meta_of(done)


async def approved_run(ts_home: Path, repo: Path, agent: str, mode: str, auto_fix_rounds: int) -> tuple[str, dict[str, Any]]:
    """Approve the baselines, commit them, then run ``agent`` (scripted ``mode``) to a stop: ``(taskId, meta)``."""
    add_scripted_profile(ts_home, agent, mode)
    async with mcp_client(ts_home) as client:
        await approve_baselines(client, repo)
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", "approved baselines")
        tid = meta_of(await client.call_tool("run_task", {"projectPath": str(repo), "task": "Add notes",
                                                          "agentId": agent, "autoFixRounds": auto_fix_rounds}))["taskId"]
        return tid, meta_of(await client.call_tool("wait_task", {"taskId": tid, "timeoutMs": 300000}))


async def test_a_recoloured_banner_fails_with_a_region_around_it_and_the_rework_restores_it(ts_home: Path, tmp_path: Path) -> None:
    repo = make_site_repo(tmp_path / "site-repo")
    add_scripted_profile(ts_home, "painter", "recolour")
    async with mcp_client(ts_home) as client:
        prep = meta_of(await client.call_tool("prepare_visual_baseline", {"projectPath": str(repo)}))
        bad = await client.call_tool("approve_visual_baseline", {"candidateId": prep["candidateId"], "expectedDigest": "0" * 64,
                                                                 "approvalNote": "looks right"})
        assert bad.is_error and "[CANDIDATE_CHANGED]" in text_of(bad)
        assert not (repo / "tests").exists()  # nothing written on a refused approval
        ok = meta_of(await client.call_tool("approve_visual_baseline", {
            "candidateId": prep["candidateId"], "expectedDigest": prep["digest"], "approvalNote": "reviewed: the green banner"}))
        target = repo / ok["targets"][0]
        manifest = json.loads(Path(str(target) + ".manifest.json").read_text())
        assert target.is_file() and manifest["approval"]["note"] == "reviewed: the green banner"
        assert manifest["viewport"]["deviceScaleFactor"] == 1
        again = await client.call_tool("approve_visual_baseline", {
            "candidateId": prep["candidateId"], "expectedDigest": prep["digest"], "approvalNote": "twice"})
        assert again.is_error and "[BASELINE_CHANGED]" in text_of(again)
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", "approved baselines")

        tid = meta_of(await client.call_tool("run_task", {"projectPath": str(repo), "task": "Add release notes to the site",
                                                          "agentId": "painter", "autoFixRounds": 1}))["taskId"]
        done = meta_of(await client.call_tool("wait_task", {"taskId": tid, "timeoutMs": 300000}))
    tdir = ts_home / "tasks" / tid
    first = json.loads((tdir / "report-0.json").read_text())
    assert done["status"] == "succeeded" and done["roundsUsed"] == 2, (done, first.get("message"))
    page = first["visual"]["results"][0]
    assert (page["id"], page["viewport"], page["status"], page["code"]) == ("home", "desktop", "failed", "PIXEL_DIFFERENCE"), page
    bounds = page["metrics"]["bounds"]
    assert bounds["y"] == 0 and bounds["y"] + bounds["height"] <= BANNER_H and bounds["width"] > 200, bounds  # the banner
    for kind in ("actual", "baseline", "diff", "regions", "metrics"):
        assert Path(page["artifacts"][kind]).is_file(), kind
    assert "visual defects: home/desktop" in first["message"].lower()
    html = (tdir / "report-0.html").read_text()
    assert "Visual acceptance" in html and 'src="visual/0/home/desktop/regions.png"' in html
    second = json.loads((tdir / "report-1.json").read_text())
    assert second["passed"] and second["visual"]["results"][0]["code"] == "PIXELS_MATCH"
    assert "#2a6" in (repo / "site" / "style.css").read_text()


async def test_no_approved_baseline_blocks_then_an_approval_with_the_task_reverifies_without_an_agent_round(
        ts_home: Path, tmp_path: Path) -> None:
    repo = make_site_repo(tmp_path / "site-repo")
    add_scripted_profile(ts_home, "noter", "new-file")
    async with mcp_client(ts_home) as client:
        with BrowserWatch(ts_home) as watch:
            tid = meta_of(await client.call_tool("run_task", {"projectPath": str(repo), "task": "Add notes",
                                                              "agentId": "noter", "autoFixRounds": 2}))["taskId"]
            waited = await client.call_tool("wait_task", {"taskId": tid, "timeoutMs": 300000})
        blocked = meta_of(waited)
        # the page was captured in Chromium, and no browser process the server started outlives the round
        assert "chromium" in watch.names() and watch.profiles, watch.names()
        assert watch.leftovers() == []
        assert f'approve_visual_baseline(..., taskId="{tid}")' in text_of(waited)  # the next step is a person's
        tdir = ts_home / "tasks" / tid
        report = json.loads((tdir / "report-0.json").read_text())
        assert blocked["status"] == "needs_attention" and blocked["pendingVisualVerification"] is True, blocked
        assert [i["code"] for i in report["blockingIssues"]] == ["BASELINE_APPROVAL_REQUIRED"], report["blockingIssues"]
        assert not (tdir / "prompt-1.txt").exists()  # no rework round was burned on it
        assert json.loads((tdir / "task.json").read_text())["pendingVisualVerification"] is True
        await approve_baselines(client, repo, tid)
        r = await client.call_tool("manage_task", {"taskId": tid, "action": "rework"})
        assert not r.is_error, text_of(r)
        done = meta_of(await client.call_tool("wait_task", {"taskId": tid, "timeoutMs": 300000}))
    assert done["status"] == "succeeded", done
    assert sorted(p.name for p in tdir.glob("prompt-*.txt")) == ["prompt-0.txt"]  # verified, no agent round
    assert json.loads((tdir / "report-1.json").read_text())["passed"]
    assert not json.loads((tdir / "task.json").read_text()).get("pendingVisualVerification")


async def test_an_agent_that_repaints_a_baseline_is_caught(ts_home: Path, tmp_path: Path) -> None:
    tid, done = await approved_run(ts_home, make_site_repo(tmp_path / "site-repo"), "forger", "tamper-baseline", 1)
    report = json.loads((ts_home / "tasks" / tid / "report-0.json").read_text())
    assert done["status"] == "needs_attention", done
    assert report["blockingIssues"][0]["code"] == "VISUAL_INTEGRITY" and "baseline" in report["blockingIssues"][0]["message"]


async def test_the_visual_tools_are_strict_and_coded(ts_home: Path, tmp_path: Path) -> None:
    repo = make_site_repo(tmp_path / "site-repo")
    cands = ts_home / "visual-candidates"
    before = sorted(cands.iterdir()) if cands.exists() else []  # the home is shared by this worker's tests
    async with mcp_client(ts_home) as client:
        names = [t.name for t in (await client.list_tools()).tools]
        assert names[:2] == ["prepare_visual_baseline", "approve_visual_baseline"]
        r = await client.call_tool("prepare_visual_baseline", {"projectPath": str(repo), "bogus": 1})
        assert r.is_error and "[INVALID_ARGUMENT]" in text_of(r) and "bogus" in text_of(r)
        r = await client.call_tool("prepare_visual_baseline", {"projectPath": str(repo), "caseIds": ["nope"]})
        assert r.is_error and "[BASELINE_SELECTION]" in text_of(r)
        r = await client.call_tool("approve_visual_baseline", {"candidateId": "not-a-uuid", "expectedDigest": "0" * 64,
                                                               "approvalNote": "x"})
        assert r.is_error and "[INVALID_ARGUMENT]" in text_of(r)
        r = await client.call_tool("approve_visual_baseline", {"candidateId": "3f0c8a4e-8d1b-4a53-9a0e-2f6d1c1e9b11",
                                                               "expectedDigest": "0" * 64, "approvalNote": "x"})
        assert r.is_error and "[CANDIDATE_NOT_FOUND]" in text_of(r)
    assert (sorted(cands.iterdir()) if cands.exists() else []) == before  # refused calls leave no candidate


async def test_an_agent_cannot_hide_a_regression_behind_the_mask_selector(ts_home: Path, tmp_path: Path) -> None:
    # the approved masks are the ones compared: the banner the agent gave the masked class is blank
    # in actual.png, which differs from the approved green banner
    tid, done = await approved_run(ts_home, make_site_repo(tmp_path / "site-repo"), "masker", "maskcheat", 0)
    page = json.loads((ts_home / "tasks" / tid / "report-0.json").read_text())["visual"]["results"][0]
    assert done["status"] == "failed" and page["code"] == "PIXEL_DIFFERENCE", (done, page)
    assert page["metrics"]["bounds"]["y"] == 0  # the banner


async def test_a_persons_baseline_approval_is_not_the_agents_work(ts_home: Path, tmp_path: Path) -> None:
    # an agent that changed nothing, blocked on a missing baseline: the approved files do not pass
    # the zero-change gate for it
    repo = make_site_repo(tmp_path / "site-repo")
    add_scripted_profile(ts_home, "idle", "noop")
    async with mcp_client(ts_home) as client:
        tid = meta_of(await client.call_tool("run_task", {"projectPath": str(repo), "task": "Add notes",
                                                          "agentId": "idle", "autoFixRounds": 0}))["taskId"]
        blocked = meta_of(await client.call_tool("wait_task", {"taskId": tid, "timeoutMs": 300000}))
        assert blocked["status"] == "needs_attention", blocked
        await approve_baselines(client, repo, tid)
        assert not (await client.call_tool("manage_task", {"taskId": tid, "action": "rework"})).is_error
        done = meta_of(await client.call_tool("wait_task", {"taskId": tid, "timeoutMs": 300000}))
    report = json.loads((ts_home / "tasks" / tid / "report-1.json").read_text())
    assert done["status"] != "succeeded" and not report["passed"], (done, report["message"])
    assert any(c["name"] == "no-changes" and not c["passed"] for c in report["checks"])
    assert report["visual"]["results"][0]["code"] == "PIXELS_MATCH"
