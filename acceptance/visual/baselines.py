"""Baselines: prepare a candidate, a person approves it (docs/visual.md §7; MCP ``prepare_visual_baseline`` /
``approve_visual_baseline``, CLI ``visual baseline prepare|approve``).

``prepare`` captures (or imports) the selected pages into ``<home>/visual-candidates/<uuid>/`` with a
sha256 per image, ``candidate.json`` and an offline ``preview.html``; nothing in the project changes.
``approve`` checks that neither the candidate, the config nor the current baselines moved since, then
writes ``<target>.png`` + ``<target>.png.manifest.json`` (with the approval note) into the project
and, with a ``taskId``, refreshes that blocked task's frozen snapshot. Automated repair never approves:
only these two host-called operations write baselines.
"""

from __future__ import annotations

import hashlib
import html
import json
import os
import shutil
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from ...core.files import atomic_write_bytes, atomic_write_text
from ...core.git import run_git
from ..config import project_layer_path, read_layer_bytes
from .capture import VisualBrowser
from .config import (
    VisualConfig,
    VisualConfigError,
    baseline_relative,
    config_digest,
    page_viewports,
    parse_visual,
)
from .decode import decode_image, encode_png
from .paths import project_file
from .errors import VisualError
from .locks import project_key, visual_lock
from .pages import browser_executable, capture_page, run_coro
from .services import ServicePool
from .snapshot import capture_snapshot, refresh

CANDIDATES_DIR = "visual-candidates"


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def project_visual(project_root: str | os.PathLike[str]) -> VisualConfig:
    """The project layer's ``visual`` block (defaults applied).

    Raises:
        VisualError: ``BASELINE_CONFIG`` when there is none, it is disabled, has no pixel page,
            or does not validate (the message carries the validation error).
    """
    raw = read_layer_bytes(project_layer_path(project_root), "project")
    block = None
    if raw is not None:
        try:
            data = json.loads(raw)
        except ValueError as exc:
            raise VisualError("BASELINE_CONFIG", f"{project_layer_path(project_root)} is not JSON: {exc}") from None
        block = data.get("visual") if isinstance(data, dict) else None
    if block is None:
        raise VisualError("BASELINE_CONFIG", "Enable visual page rules before preparing baselines "
                                             "(no visual block in .tianshu-mcp/acceptance.json)")
    try:
        cfg = parse_visual(block)
    except VisualConfigError as exc:
        raise VisualError("BASELINE_CONFIG", f"the visual block is invalid: {exc}") from None
    if not cfg.enabled or not any(p.pixel for p in cfg.pages):
        raise VisualError("BASELINE_CONFIG", "Enable visual page rules before preparing baselines")
    return cfg


def _selection(cfg: VisualConfig, case_ids: Sequence[str] | None, viewport_ids: Sequence[str] | None) -> list[tuple[Any, Any]]:
    pixel = {p.id.lower(): p for p in cfg.pages if p.pixel}
    known_vp = {v.id.lower() for v in cfg.viewports}
    for cid in case_ids or []:
        if cid.lower() not in pixel:
            raise VisualError("BASELINE_SELECTION", f"unknown page {cid!r} (pixel pages: {', '.join(sorted(pixel)) or 'none'})")
    for vid in viewport_ids or []:
        if vid.lower() not in known_vp:
            raise VisualError("BASELINE_SELECTION", f"unknown viewport {vid!r} (viewports: {', '.join(sorted(known_vp))})")
    chosen = {c.lower() for c in case_ids} if case_ids else None
    vps = {v.lower() for v in viewport_ids} if viewport_ids else None
    pairs = []
    for page in cfg.pages:
        if not page.pixel or (chosen is not None and page.id.lower() not in chosen):
            continue
        for vp in page_viewports(cfg, page):
            if vps is None or vp.id.lower() in vps:
                pairs.append((page, vp))
    return pairs


def prepare(home: str | os.PathLike[str], project_root: str | os.PathLike[str], *, case_ids: Sequence[str] | None = None,
            viewport_ids: Sequence[str] | None = None, imports: Sequence[Mapping[str, str]] = (),
            timeout_ms: int | None = None) -> dict[str, Any]:
    """Prepare a baseline candidate (docs/visual.md §7 Prepare).

    Args:
        home: the data home. project_root: the project (its real path is used).
        case_ids / viewport_ids: the pages / viewports to include (None: all pixel pages / their viewports).
        imports: ``[{caseId, viewportId, file}]``: use that project file instead of a capture.
        timeout_ms: the whole capture budget (default ``limits.roundTimeoutMs``).

    Returns:
        ``{"candidateId", "digest" (sha256 of candidate.json), "preview" (path of preview.html),
        "entries": [{"target", "digest"}]}``.

    Raises:
        VisualError: ``VISUAL_BUSY``, ``BASELINE_CONFIG``, ``BASELINE_SELECTION``,
            ``BASELINE_TARGET_CONFLICT``, ``BASELINE_IMPORT_CONFLICT``, any capture or decode code.
            Nothing is left in ``visual-candidates`` on failure.
    """
    root = os.path.realpath(os.fspath(project_root))
    with visual_lock(home, project_key(root), "prepare"):
        cfg = project_visual(root)
        pairs = _selection(cfg, case_ids, viewport_ids)
        wanted: dict[tuple[str, str], list[Mapping[str, str]]] = {}
        for imp in imports:
            wanted.setdefault((str(imp["caseId"]).lower(), str(imp["viewportId"]).lower()), []).append(imp)
        for key, items in wanted.items():
            if len(items) > 1:
                raise VisualError("BASELINE_IMPORT_CONFLICT", f"{len(items)} imports for page {key[0]} at viewport {key[1]}")
        snap = capture_snapshot(root)
        cand_id = str(uuid.uuid4())
        final = Path(home) / CANDIDATES_DIR / cand_id
        work = final.with_name(f".incoming-{cand_id}")
        work.mkdir(parents=True)
        try:
            entries = run_coro(_fill(cfg, root, pairs, wanted, snap, work, timeout_ms))
            if not entries:
                raise VisualError("BASELINE_SELECTION", "the selection names no pixel page and viewport")
            candidate = {"id": cand_id, "projectPath": root, "configDigest": config_digest(cfg), "entries": entries,
                         "createdAt": _now()}
            text = json.dumps(candidate, indent=2, ensure_ascii=False)
            atomic_write_text(work / "candidate.json", text)
            atomic_write_text(work / "preview.html", _preview(candidate))
            os.rename(work, final)
        except BaseException:
            shutil.rmtree(work, ignore_errors=True)
            raise
    return {"candidateId": cand_id, "digest": _sha(text.encode("utf-8")), "preview": str(final / "preview.html"),
            "entries": [{"target": e["target"], "digest": e["digest"]} for e in entries]}


async def _fill(cfg: VisualConfig, root: str, pairs: list[tuple[Any, Any]], wanted: dict[tuple[str, str], list[Mapping[str, str]]],
                snap: dict[str, Any], work: Path, timeout_ms: int | None) -> list[dict[str, Any]]:
    deadline = time.monotonic() + (timeout_ms or cfg.limits.roundTimeoutMs) / 1000
    entries: list[dict[str, Any]] = []
    targets: set[str] = set()
    used: set[tuple[str, str]] = set()
    browser: VisualBrowser | None = None
    pool = ServicePool(root, service_timeout_ms=cfg.limits.serviceTimeoutMs)
    try:
        for page, vp in pairs:
            target = baseline_relative(cfg, page, vp)
            if target.lower() in targets:
                raise VisualError("BASELINE_TARGET_CONFLICT", f"pages share the baseline {target} (page {page.id}, viewport {vp.id})")
            targets.add(target.lower())
            key = (page.id.lower(), vp.id.lower())
            if key in wanted:
                used.add(key)
                src = wanted[key][0]["file"]
                dec = decode_image(project_file(root, src), input_bytes=cfg.limits.inputBytes,
                                   decoded_pixels=cfg.limits.decodedPixels, deadline=deadline)
                png = encode_png(dec.rgba)
                evidence: dict[str, Any] = {"importedFrom": src, "sourceDigest": _sha(dec.data),
                                            "viewport": vp.model_dump(by_alias=True, mode="json"),
                                            "browserKind": cfg.browser.mode, "platform": _platform()}
            else:
                if browser is None:
                    browser = await VisualBrowser.launch(executable_path=browser_executable(cfg), locale=cfg.defaults.locale,
                                                         browser_kind=cfg.browser.mode)
                shot = await capture_page(browser, pool, cfg, page, vp, root, deadline)
                png = shot.png
                evidence = {**shot.environment, "masks": shot.masks}
            name = f"{page.id}-{vp.id}.png"
            atomic_write_bytes(work / name, png)
            digest = _sha(png)
            entries.append({"target": target, "image": name, "digest": digest,
                            "originalDigest": snap["baselines"].get(target),
                            "originalManifestDigest": snap["baselines"].get(target + ".manifest.json"),
                            "manifest": {**evidence, "caseId": page.id, "viewport": vp.model_dump(by_alias=True, mode="json"),
                                         "effectiveRules": {"defaults": cfg.defaults.model_dump(by_alias=True, mode="json"),
                                                            "page": page.model_dump(by_alias=True, mode="json")},
                                         "normalizedDigest": digest}})
    finally:
        await pool.aclose()
        if browser is not None:
            await browser.aclose()
    unused = sorted(set(wanted) - used)
    if unused:
        raise VisualError("BASELINE_SELECTION", "imports not in the selection: " + ", ".join(f"{c}/{v}" for c, v in unused))
    return entries


def _platform() -> str:
    import sys

    return {"linux": "linux", "darwin": "darwin", "win32": "win32"}.get(sys.platform, sys.platform)


def _preview(candidate: Mapping[str, Any]) -> str:
    rows = "".join(
        f'<figure><img src="{html.escape(e["image"])}" alt="{html.escape(e["target"])}" style="max-width:100%;border:1px solid #ccc">'
        f'<figcaption><code>{html.escape(e["target"])}</code><br>sha256 <code>{html.escape(e["digest"])}</code></figcaption></figure>'
        for e in candidate["entries"])
    return ("<!doctype html><html><head><meta charset=\"utf-8\"><title>Baseline candidate</title></head><body>"
            f"<h1>Baseline candidate {html.escape(candidate['id'])}</h1>"
            f"<p>Project <code>{html.escape(candidate['projectPath'])}</code>; review every image, then approve with "
            "approve_visual_baseline (candidateId, expectedDigest, approvalNote).</p>"
            f"{rows}</body></html>")


@dataclass(frozen=True)
class TaskGate:
    """The blocked task an approval also unblocks: its directory, project and a status probe
    (``is_blocked()`` → the task is ``needs_attention``; asked under the project lock)."""

    task_id: str
    task_dir: Path
    project_path: str
    is_blocked: Callable[[], bool]


def approve(home: str | os.PathLike[str], candidate_id: str, expected_digest: str, note: str,
            task: TaskGate | None = None) -> dict[str, Any]:
    """Approve a candidate (docs/visual.md §7 Approve).

    Returns: ``{"approvedAt", "targets": [relPath]}``.

    Raises:
        VisualError: ``CANDIDATE_NOT_FOUND``, ``CANDIDATE_CHANGED`` (digest or an image differs),
            ``APPROVAL_NOTE_REQUIRED``, ``VISUAL_BUSY``, ``CANDIDATE_PROJECT``, ``CONFIG_CHANGED``,
            ``BASELINE_CHANGED`` (a baseline moved since prepare — also a second approval),
            ``BASELINE_IGNORED`` (git ignores the target), ``TASK_NOT_BLOCKED``.
    """
    if not note.strip():
        raise VisualError("APPROVAL_NOTE_REQUIRED", "approvalNote must say why these baselines are right")
    try:
        uuid.UUID(candidate_id)
    except ValueError:
        raise VisualError("CANDIDATE_NOT_FOUND", f"{candidate_id!r} is not a candidate id (a UUID)") from None
    cdir = Path(home) / CANDIDATES_DIR / candidate_id
    try:
        text = (cdir / "candidate.json").read_text(encoding="utf-8")
    except FileNotFoundError:
        raise VisualError("CANDIDATE_NOT_FOUND", f"no baseline candidate {candidate_id}") from None
    digest = _sha(text.encode("utf-8"))
    if digest != expected_digest:
        raise VisualError("CANDIDATE_CHANGED", f"candidate.json has digest {digest}, not the expected {expected_digest}")
    cand = json.loads(text)
    root = str(cand.get("projectPath") or "")
    with visual_lock(home, project_key(root), "approve"):
        if cand.get("id") != candidate_id or not os.path.isdir(root):
            raise VisualError("CANDIDATE_PROJECT", f"candidate {candidate_id} does not belong to an existing project ({root})")
        if task is not None and os.path.realpath(task.project_path) != os.path.realpath(root):
            raise VisualError("TASK_NOT_BLOCKED", f"task {task.task_id} belongs to {task.project_path}, not to {root}")
        cfg = project_visual(root)
        if config_digest(cfg) != cand.get("configDigest"):
            raise VisualError("CONFIG_CHANGED", "the visual block changed since the candidate was prepared; prepare again")
        now = capture_snapshot(root)["baselines"]
        writes: list[tuple[Path, bytes]] = []
        at = _now()
        for e in cand["entries"]:
            try:
                png = (cdir / e["image"]).read_bytes()
            except (OSError, KeyError, TypeError):
                raise VisualError("CANDIDATE_CHANGED", f"the candidate image {e.get('image')} is missing or unreadable") from None
            if _sha(png) != e["digest"]:
                raise VisualError("CANDIDATE_CHANGED", f"the candidate image {e['image']} changed since it was prepared")
            target = str(e["target"])
            if (now.get(target), now.get(target + ".manifest.json")) != (e.get("originalDigest"), e.get("originalManifestDigest")):
                raise VisualError("BASELINE_CHANGED", f"{target} changed since the candidate was prepared (or was approved already)")
            if _git_ignored(root, target):
                raise VisualError("BASELINE_IGNORED", f"git ignores {target}: an approved baseline must be committed with the project")
            manifest = {**e["manifest"], "approval": {"note": note.strip(), "at": at, "candidateId": candidate_id,
                                                      "candidateDigest": digest}}
            dest = project_file(root, target)
            writes.append((dest, png))
            writes.append((Path(str(dest) + ".manifest.json"), (json.dumps(manifest, indent=2, ensure_ascii=False) + "\n").encode()))
        if task is not None and not task.is_blocked():
            raise VisualError("TASK_NOT_BLOCKED", f"task {task.task_id} is not needs_attention; only a blocked task's snapshot is refreshed")
        for path, data in writes:
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_bytes(path, data)
        if task is not None:
            old = (json.loads((task.task_dir / "visual-snapshot.json").read_text()) if (task.task_dir / "visual-snapshot.json").exists() else {})
            refresh(task.task_dir, root, {"note": note.strip(), "at": at, "previousDigest": old.get("configDigest")})
        atomic_write_text(cdir / "approval.json", json.dumps({"note": note.strip(), "at": at, "candidateDigest": digest,
                                                              "taskId": task.task_id if task else None}, indent=2))
    return {"approvedAt": at, "targets": [str(e["target"]) for e in cand["entries"]]}


def _git_ignored(root: str, target: str) -> bool:
    """``git check-ignore -- <target> <target>.manifest.json`` exits 0: one of them is ignored
    (``-q`` is refused with two paths: git exits 128, which read as "not ignored")."""
    return run_git(["check-ignore", "--", target, target + ".manifest.json"], root, timeout_ms=30_000).ok
