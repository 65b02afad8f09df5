"""``tianshu-mcp visual …``: visual acceptance from the command line (docs/tools.md §5; docs/visual.md §7,
§9).

Every subcommand prints one JSON object (2-space) on stdout and exits 0 on success, 1 on a coded
failure (``{"error": {"code", "message"}}``; ``doctor`` also exits 1 when a check failed) and 2 on
a usage error (``Usage: tianshu-mcp visual …`` on stderr). The work is done by
:mod:`tianshu_mcp.acceptance.visual`; this module parses argv, reads task records and renders.

A task is *blocked* (an approval may unblock it) when its ``task.json`` says so: the CLI cannot read
Prefect states, so ``errorType == "verify_failed"`` with ``pendingVisualVerification == true`` and a
``finishedAt`` stand for "``needs_attention`` on a visual block" (a rework clears ``errorType`` and
``finishedAt``). Anything else is ``TASK_NOT_BLOCKED``. Image-dependent modules are imported on use.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import re
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..acceptance.visual.config import (
    VisualConfig,
    baseline_relative,
    page_viewports,
    parse_visual,
)
from ..acceptance.visual.errors import VisualError
from ..acceptance.visual.locks import project_key, visual_lock
from ..core.errors import ErrorCode, TianshuError
from ..core.files import atomic_write_json, atomic_write_text, read_json
from ..core.git import run_git
from ..core.paths import check_project_path
from ..core.settings import data_home
from ..mcp_server.visual_records import (
    is_blocked,
    mark_unblocked,
    own_dir,
    project_root,
    read_layer,
    read_task,
    task_project,
    visual_config,
)
from .commands import print_json

USAGE = """Usage: tianshu-mcp visual init [project]               add a disabled visual template (project: default cwd)
       tianshu-mcp visual doctor [project]             check Chromium, image libraries, the block, baselines, .gitignore
       tianshu-mcp visual browser install              (browsers are never downloaded: prints the apt hint)
       tianshu-mcp visual baseline prepare <request.json>   the prepare_visual_baseline body, from a file
       tianshu-mcp visual baseline approve <request.json>   the approve_visual_baseline body, from a file
       tianshu-mcp visual rules review <taskId>        record a task's changed visual rules/baselines for review
       tianshu-mcp visual rules approve <taskId> <reviewId> <digest> <note>   accept the review (unblocks the task)
       tianshu-mcp visual artifacts clean <taskId> [--apply]   preview, or delete <taskDir>/visual
       tianshu-mcp visual content probe <project> [ruleId]     judge the content rules' files now (no cache)
       tianshu-mcp visual content cache clear <taskId>  drop a task's content judgement cache
Output is JSON on stdout; exit 0 ok, 1 coded failure (or a failed doctor check), 2 usage error."""

CHROMIUM_HINT = "install Debian's chromium package (apt-get install chromium); browsers are never downloaded"
REVIEW_PREFIX = "visual-review-"
REVIEW_ID_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
TEMPLATE: dict[str, Any] = {
    "enabled": False, "baselineRoot": "tests/visual/baselines",
    "viewports": [{"id": "desktop", "width": 1280, "height": 720, "deviceScaleFactor": 1},
                  {"id": "mobile", "width": 390, "height": 844, "deviceScaleFactor": 1}],
    "defaults": {"capture": "viewport", "pixelThreshold": 0.1, "maxDiffRatio": 0.001, "locale": "en-US", "timezone": "UTC",
                 "colorScheme": "light"},
    "limits": {"itemTimeoutMs": 60000, "roundTimeoutMs": 300000},
    "pages": [{"id": "home", "source": {"type": "static", "root": "dist"}, "route": "/", "maskSelectors": [],
               "pixelThreshold": 0.1, "maxDiffRatio": 0.001}],
}
"""The ``visual init`` template (docs/visual.md §1): disabled; one static page at two viewports."""
Out = tuple[dict[str, Any], int]


class UsageError(Exception):
    """Bad argv: printed with :data:`USAGE`, exit 2."""


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def init(project: str | None = None) -> Out:
    """``visual init [project]``: add :data:`TEMPLATE` to ``.tianshu-mcp/acceptance.json`` (created
    when missing, other keys kept, atomic) → ``{file, created, visual, next}``.
    Raises VISUAL_EXISTS, CONFIG_INVALID, CONFIG_UNREADABLE, PATH_*."""
    root = project_root(project)
    path, data = read_layer(root)
    if data is not None and "visual" in data:
        raise VisualError("VISUAL_EXISTS", f"{path} already has a visual block; edit it instead")
    parse_visual(TEMPLATE)
    path.parent.mkdir(exist_ok=True)
    atomic_write_json(path, {**(data or {}), "visual": TEMPLATE})
    return {"file": str(path), "created": data is None, "visual": TEMPLATE,
            "next": "edit pages/viewports/thresholds, set enabled: true, then run `tianshu-mcp visual doctor`"}, 0


async def _browser_version(exe: str | None, cfg: VisualConfig | None) -> str:
    from ..acceptance.visual.capture import VisualBrowser

    browser = await VisualBrowser.launch(executable_path=exe, locale=cfg.defaults.locale if cfg else "en-US",
                                         browser_kind=cfg.browser.mode if cfg else "managed")
    try:
        return browser.version
    finally:
        await browser.aclose()


def _approval_problem(root: str, target: str) -> str | None:
    """None when ``target`` is an approved baseline (PNG + manifest with approval and its digest)."""
    from ..acceptance.visual.paths import project_file

    try:
        png = project_file(root, target)
        manifest = json.loads(Path(str(png) + ".manifest.json").read_text(encoding="utf-8"))
        digest = _sha(png.read_bytes())
    except VisualError as exc:
        return exc.message
    except FileNotFoundError:
        return "not approved (baseline or manifest missing)"
    except (OSError, ValueError):
        return "baseline or manifest unreadable"
    if not isinstance(manifest, dict) or not manifest.get("approval") or manifest.get("normalizedDigest") != digest:
        return "baseline content does not match its approved manifest"
    return None


def _git_ignored(root: str, paths: list[str]) -> tuple[bool, str]:
    if not paths:
        return True, "no baseline to check"
    r = run_git(["check-ignore", "--", *paths], root, timeout_ms=30_000)
    if r.status is None:
        return False, f"git check-ignore did not run: {r.stderr.strip() or 'timed out'}"
    if r.status == 1:
        return True, f"git ignores none of the {len(paths)} baseline file(s)"
    if r.status == 0:
        return False, "git ignores " + ", ".join(r.stdout.split()) + "; approved baselines must be committed"
    return False, f"git check-ignore failed: {(r.stderr.strip().splitlines() or ['?'])[0]}"


def doctor(project: str | None = None) -> Out:
    """``visual doctor [project]`` → ``{ok, project, checks: [{name, ok, detail}]}``, exit 1 when a
    check failed: ``chromium`` (launched headless through Playwright and closed; version),
    ``imageLibraries`` (Pillow, numpy, scikit-image), ``visualConfig``, ``baselines`` (every pixel
    page × viewport approved; names the missing; informative only while disabled), ``gitIgnore``."""
    from ..acceptance.visual.pages import CHROMIUM, browser_executable, run_coro

    root = project_root(project)
    checks: list[dict[str, Any]] = []
    add = lambda name, ok, detail: checks.append({"name": name, "ok": bool(ok), "detail": detail})
    cfg: VisualConfig | None = None
    cfg_error = ""
    try:
        cfg = visual_config(root)
    except (TianshuError, VisualError) as exc:
        cfg_error = exc.message
    exe = browser_executable(cfg) if cfg is not None else CHROMIUM
    try:
        add("chromium", True, f"{exe or CHROMIUM} {run_coro(_browser_version(exe, cfg))} launched headless through Playwright")
    except Exception as exc:  # noqa: BLE001 - VisualError (BROWSER_MISSING …) or Playwright itself: a failed check
        add("chromium", False, f"[{getattr(exc, 'code', type(exc).__name__)}] {getattr(exc, 'message', exc)}; {CHROMIUM_HINT}")
    libs, missing = [], []
    for mod, label in (("PIL", "Pillow"), ("numpy", "numpy"), ("skimage", "scikit-image")):
        try:
            libs.append(f"{label} {getattr(importlib.import_module(mod), '__version__', '?')}")
        except ImportError as exc:
            missing.append(f"{label} ({exc})")
    add("imageLibraries", not missing, "missing: " + ", ".join(missing) if missing else ", ".join(libs))
    if cfg is None:
        add("visualConfig", False, cfg_error)
        for name in ("baselines", "gitIgnore"):
            add(name, False, "not checked: the visual block is missing or invalid")
    else:
        add("visualConfig", True, f"valid; enabled={str(cfg.enabled).lower()}, {len(cfg.pages)} page(s), "
                                  f"{len(cfg.images)} image rule(s), {len(cfg.contents)} content rule(s)")
        targets: dict[str, str] = {}
        for page in (p for p in cfg.pages if p.pixel):
            for vp in page_viewports(cfg, page):
                targets.setdefault(baseline_relative(cfg, page, vp), f"{page.id}/{vp.id}")
        problems = [f"{label} ({t}): {why}" for t, label in targets.items() if (why := _approval_problem(root, t))]
        detail = ("missing or not approved: " + "; ".join(problems) if problems
                  else f"{len(targets)} approved baseline(s)" if targets else "no pixel page")
        if problems and not cfg.enabled:
            detail = "visual.enabled is false (nothing is checked yet); once enabled, " + detail
        add("baselines", not problems or not cfg.enabled, detail)
        add("gitIgnore", *_git_ignored(root, [p for t in targets for p in (t, t + ".manifest.json")]))
    ok = all(c["ok"] for c in checks)
    return {"ok": ok, "project": root, "checks": checks}, 0 if ok else 1


def browser_install() -> Out:
    """``visual browser install``: never downloads; raises BROWSER_INSTALL_UNSUPPORTED with the apt hint."""
    raise VisualError("BROWSER_INSTALL_UNSUPPORTED", f"tianshu-mcp uses /usr/lib/chromium/chromium: {CHROMIUM_HINT}")


def _request(path: str, tool: Any) -> dict[str, Any]:
    """The request file validated like the MCP tool's arguments (INVALID_ARGUMENT)."""
    from ..mcp_server.format import validate_arguments

    try:
        data = read_json(path)
    except (OSError, ValueError) as exc:
        raise TianshuError(ErrorCode.INVALID_ARGUMENT, f"request {path} cannot be read as JSON: {exc}") from None
    if not isinstance(data, dict):
        raise TianshuError(ErrorCode.INVALID_ARGUMENT, f"request {path} is not a JSON object")
    return validate_arguments(tool.name, tool.input_schema, data)


def baseline_prepare(request: str) -> Out:
    """``visual baseline prepare <request.json>`` (the prepare_visual_baseline body) → ``{candidateId,
    digest, preview, entries}``. Raises INVALID_ARGUMENT, PATH_*, every code of baselines.prepare."""
    from ..acceptance.visual.baselines import prepare
    from ..mcp_server.tools import PREPARE_VISUAL_BASELINE

    args = _request(request, PREPARE_VISUAL_BASELINE)
    home = data_home()
    return prepare(home, check_project_path(args["projectPath"], home).norm, case_ids=args.get("caseIds"),
                   viewport_ids=args.get("viewportIds"), imports=args.get("imports") or ()), 0


def baseline_approve(request: str) -> Out:
    """``visual baseline approve <request.json>`` (the approve_visual_baseline body) → ``{approvedAt,
    targets}``. A ``taskId`` must name a blocked task (:func:`is_blocked`) of the candidate's project,
    else TASK_NOT_BLOCKED; its snapshot is refreshed and ``pendingVisualVerification`` kept."""
    from ..acceptance.visual.baselines import TaskGate, approve
    from ..mcp_server.tools import APPROVE_VISUAL_BASELINE

    args = _request(request, APPROVE_VISUAL_BASELINE)
    gate, store, tid = None, None, args.get("taskId")
    if tid:
        store, tdir, record = read_task(tid)
        gate = TaskGate(tid, tdir, task_project(tid, record), lambda: is_blocked(store.read(tid)))  # type: ignore[union-attr]
    out = approve(data_home(), args["candidateId"], args["expectedDigest"], args["approvalNote"], gate)
    if tid and store is not None:
        mark_unblocked(store, tid, f"visual baseline approved ({len(out['targets'])} target(s))")
    return out, 0


def _snapshot_digest(task_dir: Path) -> str | None:
    try:
        return _sha((task_dir / "visual-snapshot.json").read_bytes())
    except FileNotFoundError:
        return None


def rules_review(task_id: str) -> Out:
    """``visual rules review <taskId>``: write ``visual-review-<uuid>.json`` = ``{reviewId, taskId,
    projectPath, previous (frozen snapshot | null | {invalid}), current (the project now),
    previousFileDigest, createdAt}`` → ``{reviewId, digest (sha256 of the file text), filename,
    previous, current, changes}``. Raises TASK_ID_INVALID, TASK_NOT_FOUND, TASK_NO_PROJECT."""
    from ..acceptance.visual.snapshot import capture_snapshot, load_snapshot

    _, tdir, record = read_task(task_id)
    root = task_project(task_id, record)
    try:
        previous: Any = load_snapshot(tdir)
    except VisualError as exc:
        previous = {"invalid": exc.message}
    current, review_id = capture_snapshot(root), str(uuid.uuid4())
    text = json.dumps({"reviewId": review_id, "taskId": task_id, "projectPath": root, "previous": previous,
                       "current": current, "previousFileDigest": _snapshot_digest(tdir), "createdAt": _now()},
                      indent=2, ensure_ascii=False) + "\n"
    path = tdir / f"{REVIEW_PREFIX}{review_id}.json"
    atomic_write_text(path, text)
    old, new = (previous.get("baselines") or {}) if isinstance(previous, dict) else {}, current["baselines"]
    changes = {"config": not isinstance(previous, dict) or previous.get("configDigest") != current["configDigest"],
               "baselines": sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))}
    return {"reviewId": review_id, "digest": _sha(text.encode("utf-8")), "filename": str(path), "previous": previous,
            "current": current, "changes": changes,
            "next": f"tianshu-mcp visual rules approve {task_id} {review_id} <digest> <note>"}, 0


def rules_approve(task_id: str, review_id: str, digest: str, note: str) -> Out:
    """``visual rules approve <taskId> <reviewId> <digest> <note>``: under the project lock, set the
    task's snapshot to the reviewed state + ``approved {note, at, previousDigest, reviewId,
    expectedDigest}`` and keep ``pendingVisualVerification`` → ``{taskId, reviewId, approvedAt, configDigest}``.

    Raises: TASK_ID_INVALID, TASK_NOT_FOUND, TASK_NO_PROJECT, REVIEW_INVALID (malformed id, blank
    note, no such review), REVIEW_CHANGED (digest mismatch), TASK_NOT_BLOCKED, REVIEW_STALE (the
    snapshot or the project moved since the review), VISUAL_BUSY."""
    from ..acceptance.visual.snapshot import capture_snapshot, refresh

    store, tdir, record = read_task(task_id)
    root = task_project(task_id, record)
    if not REVIEW_ID_RE.match(review_id) or not note.strip():
        raise VisualError("REVIEW_INVALID", "reviewId must be the UUID `visual rules review` printed, and the note "
                                            "must say why the change is right")
    try:
        text = (tdir / f"{REVIEW_PREFIX}{review_id}.json").read_text(encoding="utf-8")
        review = json.loads(text)
    except (OSError, ValueError):
        raise VisualError("REVIEW_INVALID", f"task {task_id} has no readable review {review_id}") from None
    if _sha(text.encode("utf-8")) != digest:
        raise VisualError("REVIEW_CHANGED", f"the review file changed (or the digest is wrong): expected {digest[:80]}")
    if not isinstance(review, dict) or review.get("reviewId") != review_id or review.get("taskId") != task_id:
        raise VisualError("REVIEW_INVALID", f"review {review_id} does not belong to task {task_id}")
    with visual_lock(data_home(), project_key(root), "rules approve"):
        if review.get("projectPath") != root or not is_blocked(store.read(task_id)):
            raise VisualError("TASK_NOT_BLOCKED", f"task {task_id} is not needs_attention on a visual block in {root}")
        now, current = capture_snapshot(root), review.get("current") or {}
        if (_snapshot_digest(tdir) != review.get("previousFileDigest")
                or (now["configDigest"], now["baselines"]) != (current.get("configDigest"), current.get("baselines"))):
            raise VisualError("REVIEW_STALE", "the task's snapshot or the project's visual rules/baselines moved since "
                                              "the review; review again")
        previous, at = review.get("previous"), _now()
        snap = refresh(tdir, root, {"note": note.strip(), "at": at, "reviewId": review_id, "expectedDigest": digest,
                                    "previousDigest": previous.get("configDigest") if isinstance(previous, dict) else None})
    mark_unblocked(store, task_id, "visual rules approved")
    return {"taskId": task_id, "reviewId": review_id, "approvedAt": at, "configDigest": snap["configDigest"]}, 0


def artifacts_clean(task_id: str, apply: bool = False) -> Out:
    """``visual artifacts clean <taskId> [--apply]``: preview ``{preview: true, target, exists, bytes,
    reports}``; --apply deletes ``<taskDir>/visual`` under the ``task:<id>`` lock, stamps
    ``visual.cleanedAt`` into each report-N.json with a visual section and re-renders its md/html
    (same round N) → ``{preview: false, target, removed, bytes, cleanedAt, reports}``; baselines are
    untouched. Raises TASK_ID_INVALID, TASK_NOT_FOUND, ARTIFACT_PATH, TASK_ACTIVE, VISUAL_BUSY."""
    from ..acceptance.report import write_report
    from ..acceptance.visual.report import visual_html, visual_markdown

    _, tdir, record = read_task(task_id)
    target = own_dir(tdir, "visual")
    if not record.get("finishedAt"):
        raise VisualError("TASK_ACTIVE", f"task {task_id} has not finished; clean its artifacts when it has")
    reports: list[tuple[Path, dict[str, Any]]] = []
    for path in sorted(tdir.glob("report-*.json")):
        m = re.fullmatch(r"report-(\d+)\.json", path.name)
        try:
            report = read_json(path) if m else None
        except (OSError, ValueError):
            continue
        if isinstance(report, dict) and isinstance(report.get("visual"), dict) and m and str(report.get("round")) == m[1]:
            reports.append((path, report))
    size = sum(f.stat().st_size for f in target.rglob("*") if f.is_file() and not f.is_symlink()) if target.is_dir() else 0
    names = [str(p) for p, _ in reports]
    if not apply:
        return {"preview": True, "target": str(target), "exists": target.is_dir(), "bytes": size, "reports": names,
                "next": "add --apply to delete it"}, 0
    with visual_lock(data_home(), f"task:{task_id}", "artifact cleanup"):
        existed, at = target.is_dir(), _now()
        if existed:
            shutil.rmtree(target)
        for _, report in reports:
            report["visual"]["cleanedAt"] = report["visual"].get("cleanedAt") or at
            write_report(tdir, report, visual_section=visual_markdown(report), visual_html=visual_html(report, tdir))
    return {"preview": False, "target": str(target), "removed": existed, "bytes": size, "cleanedAt": at, "reports": names}, 0


def content_cache_clear(task_id: str) -> Out:
    """``visual content cache clear <taskId>``: remove ``<taskDir>/visual-content-cache/`` under the
    ``task:<id>`` lock → ``{taskId, removed (entries)}``. Raises TASK_ID_INVALID, TASK_NOT_FOUND,
    ARTIFACT_PATH, VISUAL_BUSY."""
    _, tdir, _ = read_task(task_id)
    target = own_dir(tdir, "visual-content-cache")
    with visual_lock(data_home(), f"task:{task_id}", "content cache clear"):
        removed = sum(1 for _ in target.glob("*.json")) if target.is_dir() else 0
        if target.is_dir():
            shutil.rmtree(target)
    return {"taskId": task_id, "removed": removed}, 0


def content_probe(project: str, rule_id: str | None = None) -> Out:
    """``visual content probe <project> [ruleId]``: judge every file of the content rules (or of
    ``ruleId``, case-insensitive) now, with no cache and evidence only in a temporary directory →
    ``{projectPath, results}`` (VisualResults of docs/visual.md §6.3, without ``artifacts``). Raises
    PATH_*, CONFIG_INVALID, CONTENT_RULE_NOT_FOUND, PATH_OUTSIDE_PROJECT (a file escapes by a symlink)
    and the round preflight's CONTENT_COMMAND_MISSING, CONTENT_ENV_MISSING, CONTENT_CONFIG_INVALID."""
    from ..acceptance.visual.content import check_content, preflight
    from ..acceptance.visual.paths import project_file

    root = project_root(project)
    cfg = visual_config(root)
    rules = [r for r in cfg.contents if rule_id is None or r.id.lower() == rule_id.lower()]
    if not rules:
        raise VisualError("CONTENT_RULE_NOT_FOUND",
                          f"no content rule {rule_id!r}" if rule_id else "the visual block has no content rules")
    content = {**cfg.content.model_dump(by_alias=True, mode="json"), "cache": False}
    preflight(content, [(r.id, r.model_dump(by_alias=True, mode="json")) for r in rules], root)
    deadline, results = time.monotonic() + cfg.limits.roundTimeoutMs / 1000, []
    with tempfile.TemporaryDirectory(prefix="tianshu-visual-probe-") as tmp:
        for rule in rules:
            for index, rel in enumerate(rule.files):
                res = check_content(result_id=rule.id, target=rel, image=project_file(root, rel), content=content,
                                    check=rule.model_dump(by_alias=True, mode="json"), project_root=root,
                                    evidence_dir=Path(tmp) / rule.id / str(index),
                                    task_dir=tmp, round_deadline=deadline, optional=not rule.blocking,
                                    input_bytes=cfg.limits.inputBytes, decoded_pixels=cfg.limits.decodedPixels)
                res.pop("artifacts", None)
                results.append(res)
    return {"projectPath": root, "results": results}, 0


ROUTES: dict[tuple[str, ...], tuple[Callable[..., Out], int, int]] = {
    ("init",): (init, 0, 1), ("doctor",): (doctor, 0, 1), ("browser", "install"): (browser_install, 0, 0),
    ("baseline", "prepare"): (baseline_prepare, 1, 1), ("baseline", "approve"): (baseline_approve, 1, 1),
    ("rules", "review"): (rules_review, 1, 1), ("rules", "approve"): (rules_approve, 4, 4),
    ("artifacts", "clean"): (artifacts_clean, 1, 1), ("content", "probe"): (content_probe, 1, 2),
    ("content", "cache", "clear"): (content_cache_clear, 1, 1),
}
"""words → (handler, least, most positional arguments)."""


def _route(argv: list[str]) -> tuple[Callable[..., Out], list[Any]]:
    for words in sorted(ROUTES, key=len, reverse=True):
        if tuple(argv[:len(words)]) != words:
            continue
        handler, low, high = ROUTES[words]
        rest = argv[len(words):]
        extra = [("--apply" in rest)] if words == ("artifacts", "clean") else []
        rest = [a for a in rest if not (extra and a == "--apply")]
        option = next((a for a in rest if a.startswith("--")), None) if words != ("rules", "approve") else None
        if option:
            raise UsageError(f"unknown option: {option}")
        if not low <= len(rest) <= high:
            raise UsageError(f"`visual {' '.join(words)}` takes {low if low == high else f'{low} to {high}'} argument(s), "
                             f"got {len(rest)}")
        return handler, [*rest, *extra]
    raise UsageError(f"unknown visual subcommand: {' '.join(argv[:3]) or '(none)'}")


def main(argv: list[str]) -> int:
    """``tianshu-mcp visual …`` → exit code (0 ok, 1 coded failure or failed doctor, 2 usage error)."""
    if argv[:1] == ["help"] or (argv[:2] != ["rules", "approve"] and ("--help" in argv or "-h" in argv)):
        sys.stdout.write(USAGE + "\n")  # a CLI subcommand, never the stdio server
        return 0
    try:
        handler, args = _route(argv)
    except UsageError as exc:
        print(f"tianshu-mcp visual: {exc}\n{USAGE}", file=sys.stderr)
        return 2
    try:
        out, code = handler(*args)
    except VisualError as exc:
        out, code = {"error": {"code": exc.code, "message": exc.message}}, 1
    except TianshuError as exc:
        out, code = {"error": {"code": exc.code.value, "message": exc.message}}, 1
    except ImportError as exc:  # Pillow/numpy/scikit-image/Playwright missing
        out, code = {"error": {"code": "IMAGE_DEPENDENCY_MISSING", "message": f"{exc}; run `tianshu-mcp visual doctor`"}}, 1
    except Exception as exc:  # noqa: BLE001 - an I/O error, a malformed report …: coded, never a traceback
        out, code = {"error": {"code": "VISUAL_INTERNAL", "message": f"{type(exc).__name__}: {exc}"}}, 1
    print_json(out)
    return code
