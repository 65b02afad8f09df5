"""``tianshu-mcp visual …`` through the real console script (docs/tools.md §5; docs/visual.md §7, §9): init,
doctor (real Chromium), browser install, baseline prepare/approve (a real capture of a static site),
rules review/approve, artifacts clean, content cache clear and content probe (a real judge process).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from conftest import CONSOLE, server_env
import psutil
from PIL import Image
from test_visual_e2e import VISUAL, make_site_repo
from tianshu_mcp.acceptance.report import write_report
from tianshu_mcp.acceptance.visual import snapshot
from tianshu_mcp.acceptance.visual.config import parse_visual
from tianshu_mcp.acceptance.visual.errors import VisualError
from tianshu_mcp.acceptance.visual.locks import project_key, visual_lock
from tianshu_mcp.acceptance.visual.report import visual_html, visual_markdown

JUDGE = str(Path(__file__).resolve().parent / "scripted_judge.py")
BLOCKED = {"errorType": "verify_failed", "pendingVisualVerification": True, "finishedAt": "2026-01-01T00:05:00.000Z"}


def visual(home: Path, *args: str, **env: str) -> tuple[int, Any, str]:
    """Run ``tianshu-mcp visual <args>``; returns (exit code, stdout JSON or None, stderr)."""
    out = subprocess.run([CONSOLE, "visual", *args], env={**server_env(home), "TIANSHU_TEST_MARK": str(home), **env},
                         capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    return out.returncode, json.loads(out.stdout) if out.stdout.strip() else None, out.stderr


def code_of(result: tuple[int, Any, str]) -> str:
    rc, data, _ = result
    assert rc == 1 and data and set(data) == {"error"}, result
    return data["error"]["code"]


def leftovers(home: Path) -> list[int]:
    """Processes started by ``visual`` runs of this home (a browser, its Playwright driver …): the
    runs' environment carries ``TIANSHU_TEST_MARK`` (kept by the child-environment scrub)."""
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.environ().get("TIANSHU_TEST_MARK") == str(home):
                found.append(proc.pid)
        except psutil.Error:
            continue
    return found


def make_task(home: Path, project: Path | None, tid: str = "tsk_20260101000000_abcdef", **fields: Any) -> Path:
    """A task record as the flows leave it (the CLI reads task.json only)."""
    tdir = home / "tasks" / tid
    tdir.mkdir(parents=True, exist_ok=True)
    record = {"taskId": tid, "createdAt": "2026-01-01T00:00:00.000Z", "roundsUsed": 1, **fields}
    if project is not None:
        record["projectPath"] = str(project.resolve())
    (tdir / "task.json").write_text(json.dumps(record))
    return tdir


def project_with(root: Path, layer: dict[str, Any]) -> Path:
    (root / ".tianshu-mcp").mkdir(parents=True)
    (root / ".tianshu-mcp" / "acceptance.json").write_text(json.dumps(layer, indent=2))
    return root


def test_init_adds_a_disabled_template_keeps_other_keys_and_refuses_a_second_time(tmp_path: Path) -> None:
    home = tmp_path / "home"
    proj = project_with(tmp_path / "proj", {"checks": [{"name": "t", "cmd": ["true"]}], "requireChanges": False})
    rc, out, _ = visual(home, "init", str(proj))
    layer = json.loads((proj / ".tianshu-mcp" / "acceptance.json").read_text())
    assert rc == 0 and out["created"] is False and out["file"] == str(proj / ".tianshu-mcp" / "acceptance.json")
    assert layer["checks"] == [{"name": "t", "cmd": ["true"]}] and layer["requireChanges"] is False
    cfg = parse_visual(layer["visual"])  # the template validates and shows what a user edits
    assert cfg.enabled is False and cfg.pages and len(cfg.viewports) == 2 and "pixelThreshold" in layer["visual"]["defaults"]
    before = (proj / ".tianshu-mcp" / "acceptance.json").read_bytes()
    assert code_of(visual(home, "init", str(proj))) == "VISUAL_EXISTS"
    assert (proj / ".tianshu-mcp" / "acceptance.json").read_bytes() == before
    cfg_out = subprocess.run([CONSOLE, "config", "acceptance", str(proj)], env=server_env(home), capture_output=True,
                             text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert json.loads(cfg_out.stdout)["ok"] is True  # the whole layer still parses
    bare = tmp_path / "bare"
    bare.mkdir()
    rc, out, _ = visual(home, "init", str(bare))
    assert rc == 0 and out["created"] is True and "visual" in json.loads((bare / ".tianshu-mcp" / "acceptance.json").read_text())
    broken = project_with(tmp_path / "broken", {})
    (broken / ".tianshu-mcp" / "acceptance.json").write_text("{not json")
    assert code_of(visual(home, "init", str(broken))) == "CONFIG_INVALID"
    assert (broken / ".tianshu-mcp" / "acceptance.json").read_text() == "{not json"
    assert code_of(visual(home, "init", str(tmp_path / "missing"))) == "PATH_NOT_FOUND"


def test_usage_errors_exit_2_and_browser_install_only_gives_the_apt_hint(tmp_path: Path) -> None:
    home = tmp_path / "home"
    for args in ([], ["bogus"], ["rules", "approve", "tsk_x", "y"], ["doctor", "--fast"], ["artifacts", "clean"],
                 ["content", "cache"], ["init", "a", "b"]):
        rc, out, err = visual(home, *args)
        assert rc == 2 and out is None and "Usage: tianshu-mcp visual" in err, (args, rc, err)
    helped = subprocess.run([CONSOLE, "visual", "doctor", "--help"], env=server_env(home), capture_output=True, text=True,
                            timeout=60, stdin=subprocess.DEVNULL)
    assert helped.returncode == 0 and "visual rules approve <taskId>" in helped.stdout
    rc, out, _ = visual(home, "browser", "install")
    assert code_of((rc, out, "")) == "BROWSER_INSTALL_UNSUPPORTED"
    assert "apt-get install chromium" in out["error"]["message"] and "playwright install" not in out["error"]["message"]


def test_doctor_names_the_apt_package_when_the_browser_is_missing(tmp_path: Path) -> None:
    home = tmp_path / "home"
    proj = project_with(tmp_path / "proj", {"visual": {**VISUAL, "browser": {"mode": "executable",
                                                                          "executablePath": "/nonexistent/chromium"}}})
    rc, out, _ = visual(home, "doctor", str(proj))
    chromium = {c["name"]: c for c in out["checks"]}["chromium"]
    assert rc == 1 and not chromium["ok"] and "[BROWSER_MISSING]" in chromium["detail"]
    assert "apt-get install chromium" in chromium["detail"] and "playwright install" not in chromium["detail"]
    assert code_of(visual(home, "doctor", str(tmp_path / "nowhere"))) == "PATH_NOT_FOUND"


def test_baseline_prepare_approve_and_doctor_on_a_real_site(tmp_path: Path) -> None:
    home = tmp_path / "home"
    repo = make_site_repo(tmp_path / "site-repo")
    rc, out, _ = visual(home, "doctor", str(repo))
    checks = {c["name"]: c for c in out["checks"]}
    assert rc == 1 and out["ok"] is False
    assert checks["chromium"]["ok"] and "launched headless" in checks["chromium"]["detail"], checks["chromium"]
    assert checks["imageLibraries"]["ok"] and checks["visualConfig"]["ok"] and checks["gitIgnore"]["ok"]
    assert not checks["baselines"]["ok"] and "home/desktop" in checks["baselines"]["detail"]
    assert leftovers(home) == []  # the doctor's browser, its driver and their trees are gone

    def request(name: str, body: Any) -> str:
        path = tmp_path / name
        path.write_text(body if isinstance(body, str) else json.dumps(body))
        return str(path)

    assert code_of(visual(home, "baseline", "prepare", request("bad.json", "{nope"))) == "INVALID_ARGUMENT"
    rc, out, _ = visual(home, "baseline", "prepare", request("extra.json", {"projectPath": str(repo), "x": 1}))
    assert code_of((rc, out, "")) == "INVALID_ARGUMENT" and "x: unknown key" in out["error"]["message"]
    assert code_of(visual(home, "baseline", "prepare", request("rel.json", {"projectPath": "site-repo"}))) == "PATH_NOT_ABSOLUTE"
    assert code_of(visual(home, "baseline", "prepare",
                          request("sel.json", {"projectPath": str(repo), "caseIds": ["nope"]}))) == "BASELINE_SELECTION"
    assert not (home / "visual-candidates").exists() or not any((home / "visual-candidates").iterdir())

    rc, cand, _ = visual(home, "baseline", "prepare", request("prep.json", {"projectPath": str(repo)}))
    assert rc == 0 and Path(cand["preview"]).is_file() and len(cand["entries"]) == 1, cand
    assert leftovers(home) == []
    assert not (repo / "tests").exists()  # prepare writes nothing into the project
    body = {"candidateId": cand["candidateId"], "expectedDigest": cand["digest"], "approvalNote": "reviewed: green banner"}
    assert code_of(visual(home, "baseline", "approve", request("wrong.json", {**body, "expectedDigest": "0" * 64}))) == "CANDIDATE_CHANGED"
    assert code_of(visual(home, "baseline", "approve",
                          request("blank.json", {**body, "approvalNote": "  "}))) == "INVALID_ARGUMENT"
    tdir = make_task(home, repo)  # not blocked: no errorType / pendingVisualVerification
    tid = tdir.name
    assert code_of(visual(home, "baseline", "approve", request("t.json", {**body, "taskId": tid}))) == "TASK_NOT_BLOCKED"
    assert code_of(visual(home, "baseline", "approve",
                          request("t2.json", {**body, "taskId": "tsk_20260101000000_ffffff"}))) == "TASK_NOT_FOUND"
    assert not (repo / "tests").exists()  # nothing written on a refusal
    make_task(home, repo, **BLOCKED)
    rc, done, _ = visual(home, "baseline", "approve", request("t.json", {**body, "taskId": tid}))
    assert rc == 0, done
    target = repo / done["targets"][0]
    manifest = json.loads(Path(str(target) + ".manifest.json").read_text())
    assert target.is_file() and manifest["approval"]["note"] == "reviewed: green banner"
    snap = json.loads((tdir / "visual-snapshot.json").read_text())
    assert snap["approved"]["note"] == "reviewed: green banner" and snap["baselines"][done["targets"][0]]
    record = json.loads((tdir / "task.json").read_text())
    assert record["pendingVisualVerification"] is True and "re-verify" in record["lastMessage"]
    snapshot.check(tdir, repo)  # the refreshed snapshot matches the project
    assert code_of(visual(home, "baseline", "approve", request("again.json", body))) == "BASELINE_CHANGED"

    rc, out, _ = visual(home, "doctor", str(repo))
    assert rc == 0 and out["ok"] is True and "1 approved baseline" in {c["name"]: c for c in out["checks"]}["baselines"]["detail"]
    (repo / ".gitignore").write_text("tests/\n")
    rc, out, _ = visual(home, "doctor", str(repo))
    git_check = {c["name"]: c for c in out["checks"]}["gitIgnore"]
    assert rc == 1 and not git_check["ok"] and done["targets"][0] in git_check["detail"]


def test_rules_review_and_approve_unblock_a_task_whose_visual_block_changed(tmp_path: Path) -> None:
    home = tmp_path / "home"
    layer_path = project_with(tmp_path / "proj", {"visual": {**VISUAL, "enabled": False}}) / ".tianshu-mcp" / "acceptance.json"
    proj = layer_path.parent.parent
    assert code_of(visual(home, "rules", "review", "bogus")) == "TASK_ID_INVALID"
    assert code_of(visual(home, "rules", "review", "tsk_20260101000000_aaaaaa")) == "TASK_NOT_FOUND"
    make_task(home, None, "tsk_20260101000000_bbbbbb")
    assert code_of(visual(home, "rules", "review", "tsk_20260101000000_bbbbbb")) == "TASK_NO_PROJECT"
    tdir = make_task(home, proj, **BLOCKED)
    tid = tdir.name
    snapshot.freeze(tdir, proj)
    edited = {"visual": {**VISUAL, "enabled": False, "defaults": {"maxDiffRatio": 0.5}}}
    layer_path.write_text(json.dumps(edited))
    try:
        snapshot.check(tdir, proj)
        raise AssertionError("the edit should break the snapshot")
    except VisualError as exc:
        assert exc.code == "VISUAL_INTEGRITY"

    rc, review, _ = visual(home, "rules", "review", tid)
    assert rc == 0 and review["changes"]["config"] is True
    path = Path(review["filename"])
    assert path.parent == tdir and path.name == f"visual-review-{review['reviewId']}.json"
    assert json.loads(path.read_text())["current"]["config"]["defaults"]["maxDiffRatio"] == 0.5
    rid, digest = review["reviewId"], review["digest"]
    assert code_of(visual(home, "rules", "approve", tid, "not-a-uuid", digest, "ok")) == "REVIEW_INVALID"
    assert code_of(visual(home, "rules", "approve", tid, rid, digest, "   ")) == "REVIEW_INVALID"
    assert code_of(visual(home, "rules", "approve", tid, rid, "0" * 64, "ok")) == "REVIEW_CHANGED"
    make_task(home, proj, errorType=None, finishedAt=None)  # a rework is running: not blocked
    assert code_of(visual(home, "rules", "approve", tid, rid, digest, "ok")) == "TASK_NOT_BLOCKED"
    make_task(home, proj, **BLOCKED)
    with visual_lock(home, project_key(proj), "test"):
        assert code_of(visual(home, "rules", "approve", tid, rid, digest, "ok")) == "VISUAL_BUSY"
    layer_path.write_text(json.dumps({"visual": {**VISUAL, "enabled": False, "defaults": {"maxDiffRatio": 0.9}}}))
    assert code_of(visual(home, "rules", "approve", tid, rid, digest, "ok")) == "REVIEW_STALE"
    layer_path.write_text(json.dumps(edited))  # back to what was reviewed
    rc, out, _ = visual(home, "rules", "approve", tid, rid, digest, "looser threshold agreed with design")
    assert rc == 0 and out["reviewId"] == rid, out
    snap = json.loads((tdir / "visual-snapshot.json").read_text())
    assert snap["approved"]["reviewId"] == rid and snap["approved"]["expectedDigest"] == digest
    assert snap["approved"]["note"] == "looser threshold agreed with design" and snap["approved"]["previousDigest"]
    snapshot.check(tdir, proj)  # the task is no longer blocked by its snapshot
    assert json.loads((tdir / "task.json").read_text())["pendingVisualVerification"] is True
    assert code_of(visual(home, "rules", "approve", tid, rid, digest, "twice")) == "REVIEW_STALE"


def _report(tdir: Path, rnd: int, with_visual: bool) -> dict[str, Any]:
    report: dict[str, Any] = {"round": rnd, "taskId": tdir.name, "projectPath": "/p", "startedAt": "s", "finishedAt": "f",
                              "passed": False, "verdict": "failed", "checks": [], "analysis": {}, "files": {},
                              "message": "visual defects: home/desktop"}
    if with_visual:
        actual = tdir / "visual" / str(rnd) / "home" / "desktop" / "actual.png"
        actual.parent.mkdir(parents=True)
        Image.new("RGB", (8, 8), (0, 200, 0)).save(actual)
        report["visual"] = {"results": [{"id": "home", "kind": "page", "target": "/", "viewport": "desktop", "status": "failed",
                                         "optional": False, "code": "PIXEL_DIFFERENCE", "message": "differs", "durationMs": 5,
                                         "repairable": True, "artifacts": {"actual": str(actual)}}],
                            "artifactDirectory": str(actual.parent.parent.parent), "artifactBytes": actual.stat().st_size}
    write_report(tdir, report, visual_section=visual_markdown(report), visual_html=visual_html(report, tdir))
    return report


def test_artifacts_clean_previews_refuses_active_or_aliased_dirs_and_restamps_the_reports(tmp_path: Path) -> None:
    home = tmp_path / "home"
    proj = project_with(tmp_path / "proj", {})
    tdir = make_task(home, proj)  # running: no finishedAt
    _report(tdir, 0, True)
    _report(tdir, 1, False)
    plain = (tdir / "report-1.json").read_bytes()
    tid = tdir.name
    assert code_of(visual(home, "artifacts", "clean", tid, "--apply")) == "TASK_ACTIVE"
    assert code_of(visual(home, "artifacts", "clean", "../etc")) == "TASK_ID_INVALID"
    make_task(home, proj, finishedAt="2026-01-01T00:05:00.000Z")
    rc, out, _ = visual(home, "artifacts", "clean", tid)
    assert rc == 0 and out["preview"] is True and out["target"] == str(tdir / "visual") and out["bytes"] > 0
    assert (tdir / "visual" / "0" / "home" / "desktop" / "actual.png").is_file()  # a preview deletes nothing

    elsewhere = tmp_path / "elsewhere"
    (tdir / "visual").rename(elsewhere)
    (tdir / "visual").symlink_to(elsewhere)
    assert code_of(visual(home, "artifacts", "clean", tid, "--apply")) == "ARTIFACT_PATH"
    assert (elsewhere / "0" / "home" / "desktop" / "actual.png").is_file()
    (tdir / "visual").unlink()
    elsewhere.rename(tdir / "visual")

    rc, out, _ = visual(home, "artifacts", "clean", tid, "--apply")
    assert rc == 0 and out["preview"] is False and out["removed"] is True, out
    assert not (tdir / "visual").exists() and out["reports"] == [str(tdir / "report-0.json")]
    report = json.loads((tdir / "report-0.json").read_text())
    assert report["visual"]["cleanedAt"] == out["cleanedAt"] and report["round"] == 0
    assert f"Artifacts were removed explicitly: {out['cleanedAt']}" in (tdir / "report-0.md").read_text()
    assert out["cleanedAt"] in (tdir / "report-0.html").read_text()
    assert (tdir / "report-1.json").read_bytes() == plain and not (tdir / "report-2.json").exists()
    assert proj.joinpath(".tianshu-mcp", "acceptance.json").is_file()  # baselines/project untouched


def test_content_cache_clear(tmp_path: Path) -> None:
    home = tmp_path / "home"
    tdir = make_task(home, tmp_path)
    cache = tdir / "visual-content-cache"
    cache.mkdir()
    for name in ("a.json", "b.json"):
        (cache / name).write_text("{}")
    rc, out, _ = visual(home, "content", "cache", "clear", tdir.name)
    assert (rc, out) == (0, {"taskId": tdir.name, "removed": 2}) and not cache.exists()
    assert visual(home, "content", "cache", "clear", tdir.name)[1] == {"taskId": tdir.name, "removed": 0}
    assert code_of(visual(home, "content", "cache", "clear", "tsk_bad")) == "TASK_ID_INVALID"
    assert code_of(visual(home, "content", "cache", "clear", "vfy_20260101000000_abcdef")) == "TASK_NOT_FOUND"


def test_content_probe_judges_the_rules_files_now_without_cache_or_evidence(tmp_path: Path) -> None:
    home = tmp_path / "home"
    counter = tmp_path / "counter.txt"
    proj = tmp_path / "proj"
    (proj / "img").mkdir(parents=True)
    Image.new("RGB", (16, 12), (200, 30, 30)).save(proj / "img" / "hero.png")
    verdict = '{"passed": true, "confidence": 0.9, "reason": "a red banner"}'
    content = {"enabled": True, "command": sys.executable, "argsTemplate": [JUDGE, f"--counter={counter}", "--verdict", verdict,
                                                                            "--file=image=<image:path>"],
               "samples": 1, "timeoutMs": 30000}
    rules = [{"id": "hero", "files": ["img/hero.png"], "expect": "A red banner"},
             {"id": "other", "files": ["img/hero.png"], "expect": "Something", "command": "no-such-judge-command"}]
    project_with(proj, {"visual": {"content": content, "contents": rules}})
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    rc, out, _ = visual(home, "content", "probe", str(proj), "HERO", TMPDIR=str(tmpdir))
    assert rc == 0, out
    [res] = out["results"]
    assert (res["id"], res["status"], res["code"], res["message"]) == ("hero", "passed", "CONTENT_MATCH", "a red banner")
    assert res["content"]["cached"] is False and "artifacts" not in res and counter.read_text().strip() == "1"
    rc, out, _ = visual(home, "content", "probe", str(proj), "hero", TMPDIR=str(tmpdir))
    assert out["results"][0]["content"]["cached"] is False and counter.read_text().strip() == "2"  # no cache
    assert list(tmpdir.iterdir()) == [] and not (home / "tasks").exists()  # no evidence kept
    rc, out, _ = visual(home, "content", "probe", str(proj), "other")
    assert code_of((rc, out, "")) == "CONTENT_COMMAND_MISSING" and "other:" in out["error"]["message"]
    assert code_of(visual(home, "content", "probe", str(proj), "nope")) == "CONTENT_RULE_NOT_FOUND"
    bare = tmp_path / "bare"  # not tmp_path itself: it holds the data home, which the path gate refuses
    bare.mkdir()
    assert code_of(visual(home, "content", "probe", str(bare))) == "CONFIG_INVALID"  # no visual block


def test_a_task_directory_that_is_a_symlink_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    # breaker: rules review wrote its review file through a symlinked task directory, outside the home
    home = tmp_path / "home"
    proj = project_with(tmp_path / "proj", {})
    tdir = make_task(home, proj, finishedAt="2026-01-01T00:05:00.000Z")
    elsewhere = tmp_path / "elsewhere"
    tdir.rename(elsewhere)
    tdir.symlink_to(elsewhere)
    before = sorted(p.name for p in elsewhere.iterdir())
    for argv in (("rules", "review", tdir.name), ("artifacts", "clean", tdir.name, "--apply"),
                 ("content", "cache", "clear", tdir.name)):
        rc, out, _ = visual(home, *argv)
        assert rc == 1 and out["error"]["code"] == "ARTIFACT_PATH" and str(tdir) in out["error"]["message"], (argv, out)
    assert sorted(p.name for p in elsewhere.iterdir()) == before
