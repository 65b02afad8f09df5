"""The visual stage of one verify round (docs/visual.md §2, §6.5).

:func:`run_visual` runs the image rules, the content rules and the pages (each pixel page at each of
its viewports: capture → compare with the approved baseline; a page's ``content`` check judges the
same screenshot) into ``<taskDir>/visual/<round>/`` and returns ``{results, artifactDirectory,
artifactBytes}``. :func:`gate` turns the results into the round's blocking issues, failures and
warnings. Jobs run one after another (``limits.concurrency`` > 1 is accepted and treated as 1: one
browser, one page at a time, so that captures never compete for the CPU and stay stable).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Callable

from ...core.files import write_new_bytes
from .capture import VisualBrowser
from .compare import compare_images
from .config import (
    Page,
    Viewport,
    VisualConfig,
    baseline_relative,
    content_id,
    effective_thresholds,
    page_viewports,
)
from .content import check_content, preflight
from .paths import project_file
from .errors import VisualError, status_of
from .images import check_image
from .pages import browser_executable, capture_page, run_coro
from .services import ServicePool

MISSING_BASELINE = ("Approved baseline missing. Prepare and review a candidate, then explicitly approve it; "
                    "this capture does not pass.")
GATING_BLOCKED_CODES = frozenset({"VISUAL_INTEGRITY", "MASK_ALL_PIXELS", "MASK_NOT_FOUND", "MASK_NOT_VISIBLE"})


def _result(id_: str, kind: str, target: str, status: str, code: str, message: str, *, optional: bool,
            viewport: str | None = None, repairable: bool = False, started: float | None = None, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"id": id_, "kind": kind, "target": target}
    if viewport is not None:
        out["viewport"] = viewport
    out.update(status=status, optional=optional, code=code, message=message,
               durationMs=int((time.monotonic() - started) * 1000) if started else 0, repairable=repairable)
    out.update({k: v for k, v in extra.items() if v is not None})
    return out


def _error_result(exc: BaseException, id_: str, kind: str, target: str, optional: bool, viewport: str | None,
                  started: float) -> dict[str, Any]:
    if isinstance(exc, VisualError):
        return _result(id_, kind, target, status_of(exc.kind), exc.code, exc.message, optional=optional, viewport=viewport,
                       repairable=exc.kind == "failed", started=started)
    return _result(id_, kind, target, "blocked", "VISUAL_INTERNAL", f"{type(exc).__name__}: {exc}", optional=optional,
                   viewport=viewport, started=started)


def run_visual(cfg: VisualConfig, project_root: str | os.PathLike[str], round_dir: str | os.PathLike[str],
               task_dir: str | os.PathLike[str], should_stop: Callable[[], bool] | None = None) -> dict[str, Any]:
    """Run the visual stage (docs/visual.md §2) and return ``{"results", "artifactDirectory",
    "artifactBytes"}``.

    Raises:
        VisualError: round-level failures only — content preflight (``CONTENT_COMMAND_MISSING``,
            ``CONTENT_ENV_MISSING``): the caller makes them the round's configuration error. Every
            per-item failure is a result, never an exception.
    """
    root = os.path.realpath(os.fspath(project_root))
    rdir = Path(round_dir)
    rdir.mkdir(parents=True, exist_ok=True)
    content_cfg = cfg.content.model_dump(by_alias=True, mode="json")
    if cfg.content.enabled:
        checks = [(r.id, r.model_dump(by_alias=True, mode="json")) for r in cfg.contents]
        checks += [(f"{p.id} (page content)", p.content.model_dump(by_alias=True, mode="json")) for p in cfg.pages if p.content]
        if checks:
            preflight(content_cfg, checks, root)
    round_deadline = time.monotonic() + cfg.limits.roundTimeoutMs / 1000
    stop = should_stop or (lambda: False)
    results: list[dict[str, Any]] = []
    for rule in cfg.images:
        for rel in rule.files:
            started = time.monotonic()
            try:
                res = check_image(rule.model_dump(by_alias=True, mode="json"), project_file(root, rel), target=rel,
                                  input_bytes=cfg.limits.inputBytes, decoded_pixels=cfg.limits.decodedPixels)
                results.append(_result(rule.id, "image", rel, res["status"], res["code"], res["message"], optional=rule.optional,
                                       repairable=res.get("repairable", False), started=started, metrics=res.get("metrics"),
                                       rules=rule.model_dump(by_alias=True, mode="json")))
            except Exception as exc:  # noqa: BLE001 - a per-item failure is a result
                results.append(_error_result(exc, rule.id, "image", rel, rule.optional, None, started))
    for rule in cfg.contents:
        for index, rel in enumerate(rule.files):
            started = time.monotonic()
            try:
                results.append(check_content(result_id=rule.id, target=rel, image=project_file(root, rel),
                                             check=rule.model_dump(by_alias=True, mode="json"), content=content_cfg,
                                             project_root=root, evidence_dir=rdir / "content" / rule.id / str(index),
                                             task_dir=task_dir, round_deadline=round_deadline, should_stop=stop,
                                             optional=not rule.blocking, input_bytes=cfg.limits.inputBytes,
                                             decoded_pixels=cfg.limits.decodedPixels))
            except Exception as exc:  # noqa: BLE001
                results.append(_error_result(exc, rule.id, "content", rel, not rule.blocking, None, started))
    if cfg.pages:
        results += run_coro(_pages(cfg, root, rdir, Path(task_dir), content_cfg, round_deadline, stop))
    return {"results": results, "artifactDirectory": str(rdir), "artifactBytes": _bytes(rdir)}


async def _pages(cfg: VisualConfig, root: str, rdir: Path, task_dir: Path, content_cfg: dict[str, Any],
                 round_deadline: float, stop: Callable[[], bool]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    pool = ServicePool(root, service_timeout_ms=cfg.limits.serviceTimeoutMs, should_stop=stop)
    browser: VisualBrowser | None = None
    launch_error: BaseException | None = None
    try:
        try:
            browser = await VisualBrowser.launch(executable_path=browser_executable(cfg), locale=cfg.defaults.locale,
                                                 browser_kind=cfg.browser.mode)
        except Exception as exc:  # noqa: BLE001 - re-raised in every page job (docs/visual.md §2 step 3)
            launch_error = exc
        for page in cfg.pages:
            for vp in page_viewports(cfg, page):
                out += await _page_job(cfg, page, vp, root, rdir, task_dir, content_cfg, round_deadline, stop,
                                       browser, pool, launch_error)
    finally:
        await pool.aclose()
        if browser is not None:
            await browser.aclose()
    return out


async def _page_job(cfg: VisualConfig, page: Page, vp: Viewport, root: str, rdir: Path, task_dir: Path,
                    content_cfg: dict[str, Any], round_deadline: float, stop: Callable[[], bool],
                    browser: VisualBrowser | None, pool: ServicePool, launch_error: BaseException | None) -> list[dict[str, Any]]:
    """One page at one viewport → ``[pixel result?, content result?]`` (docs/visual.md §2.2)."""
    started = time.monotonic()
    item = rdir / page.id / vp.id
    pixel: dict[str, Any] | None = None
    content: dict[str, Any] | None = None
    if page.pixel:
        pixel = _result(page.id, "page", page.route, "passed", "PIXELS_MATCH", "Screenshot matches approved baseline",
                        optional=page.optional, viewport=vp.id)
    try:
        if stop():
            raise VisualError("CANCELLED", "the round was cancelled")
        if time.monotonic() >= round_deadline:
            raise VisualError("ROUND_TIMEOUT", f"the visual stage ran past roundTimeoutMs ({cfg.limits.roundTimeoutMs} ms)")
        if launch_error is not None or browser is None:
            raise launch_error or VisualError("BROWSER_MISSING", "no browser")
        shot = await capture_page(browser, pool, cfg, page, vp, root, round_deadline)
        actual = item / "actual.png"
        write_new_bytes(actual, shot.png)
        if pixel is not None:
            pixel.update(environment=shot.environment, rules=_rules(cfg, page), masks=shot.masks,
                         artifacts={"actual": str(actual)})
        if page.content is not None:
            content = check_content(result_id=content_id(page), target=page.route, image=actual,
                                    check=page.content.model_dump(by_alias=True, mode="json"), content=content_cfg,
                                    project_root=root, evidence_dir=rdir / "content" / content_id(page) / vp.id,
                                    task_dir=task_dir, round_deadline=round_deadline, should_stop=stop,
                                    optional=not page.content.blocking, viewport=vp.id,
                                    input_bytes=cfg.limits.inputBytes, decoded_pixels=cfg.limits.decodedPixels)
        if pixel is not None:
            _compare(cfg, page, vp, root, item, shot.masks, pixel)
    except Exception as exc:  # noqa: BLE001 - every failure of the job is a result
        if pixel is not None:
            keep = {k: pixel[k] for k in ("environment", "rules", "masks", "artifacts") if k in pixel}
            pixel = {**_error_result(exc, page.id, "page", page.route, page.optional, vp.id, started), **keep}
        if page.content is not None and content is None:
            code = exc.code if isinstance(exc, VisualError) else "VISUAL_INTERNAL"
            msg = exc.message if isinstance(exc, VisualError) else str(exc)
            cancelled = isinstance(exc, VisualError) and exc.kind == "cancelled"
            content = _result(content_id(page), "content", page.route, "skipped" if cancelled else "blocked", code,
                              f"Page capture failed before content check: {msg}", optional=not page.content.blocking,
                              viewport=vp.id, started=started, rules=page.content.model_dump(by_alias=True, mode="json"))
    if pixel is not None:
        pixel["durationMs"] = int((time.monotonic() - started) * 1000)
    return [r for r in (pixel, content) if r is not None]


def _rules(cfg: VisualConfig, page: Page) -> dict[str, Any]:
    threshold, ratio = effective_thresholds(cfg, page)
    rules = {**cfg.defaults.model_dump(by_alias=True, mode="json"), **page.model_dump(by_alias=True, mode="json", exclude_none=True)}
    rules.update(pixelThreshold=threshold, maxDiffRatio=ratio)
    return rules


def _compare(cfg: VisualConfig, page: Page, vp: Viewport, root: str, item: Path, masks: list[dict[str, Any]],
             pixel: dict[str, Any]) -> None:
    """Check the approved baseline, then compare (docs/visual.md §2.2, §4); updates ``pixel`` in place."""
    import hashlib
    import json

    from .compare import Rect

    baseline = project_file(root, baseline_relative(cfg, page, vp))
    manifest_path = Path(str(baseline) + ".manifest.json")
    if not baseline.is_file() or not manifest_path.is_file():
        raise VisualError("BASELINE_APPROVAL_REQUIRED", MISSING_BASELINE)
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise VisualError("VISUAL_INTEGRITY", "Baseline manifest is invalid") from None
    if (not isinstance(manifest, dict) or not manifest.get("approval")
            or manifest.get("normalizedDigest") != hashlib.sha256(baseline.read_bytes()).hexdigest()):
        raise VisualError("VISUAL_INTEGRITY", "Baseline content does not match approved manifest")
    threshold, ratio = effective_thresholds(cfg, page)
    # the masks a person approved with the baseline, not this capture's: an element the agent gave a
    # masked class is blank in actual.png and differs from the baseline instead of being excluded
    approved = manifest.get("masks")
    use = approved if isinstance(approved, list) else masks
    try:
        cmp = compare_images(baseline, item / "actual.png", item, pixel_threshold=threshold, max_diff_ratio=ratio,
                             masks=[Rect(m["x"], m["y"], m["width"], m["height"]) for m in use], ssim=True,
                             input_bytes=cfg.limits.inputBytes, decoded_pixels=cfg.limits.decodedPixels)
    except VisualError as exc:
        if exc.kind == "failed" and exc.code.startswith("IMAGE_"):  # the approved baseline cannot be read:
            raise VisualError(exc.code, f"the approved baseline {baseline.name} cannot be used: {exc.message}; "
                                        "prepare and approve it again", "blocked") from None
        raise
    shot_vp = manifest.get("viewport") if isinstance(manifest.get("viewport"), dict) else {}
    if cmp.code == "DIMENSION_MISMATCH" and shot_vp and (shot_vp.get("width"), shot_vp.get("height")) != (vp.width, vp.height):
        raise VisualError("BASELINE_CONFIG", f"the baseline was approved for a {shot_vp.get('width')}×{shot_vp.get('height')} "
                                             f"viewport, the config now says {vp.width}×{vp.height}; prepare and approve it again")
    pixel.update(metrics=cmp.metrics, regions=cmp.regions, artifacts={**pixel.get("artifacts", {}), **cmp.artifacts})
    if not cmp.passed:
        msg = "Screenshot differs from approved baseline"
        if cmp.code == "DIMENSION_MISMATCH":
            m = cmp.metrics
            msg = (f"Screenshot size {m.get('actualWidth')}×{m.get('actualHeight')} differs from the baseline's "
                   f"{m.get('baselineWidth')}×{m.get('baselineHeight')}")
        pixel.update(status="failed", code=cmp.code, message=msg, repairable=True)


def _bytes(path: Path) -> int:
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.path.getsize(os.path.join(dirpath, name))
            except OSError:
                pass
    return total


def gate(results: list[dict[str, Any]]) -> dict[str, list[Any]]:
    """How the results gate the round (docs/visual.md §6.5).

    Returns:
        ``{"blocking": [{code, message}], "failed": [ids], "uncertain": [ids], "warnings": [ids with code]}``:
        ``blocking`` — blocked results that are not optional or carry an integrity/mask code (the
        round fails, the task waits for a person: ``needs_attention``); ``failed`` — non-optional
        failures (the round fails, the agent can repair); ``uncertain`` never gates; ``warnings``
        — optional content results that did not pass.
    """
    blocking = [{"code": r["code"], "message": f"{r['id']}: {r['message']}"} for r in results
                if r["status"] == "blocked" and (not r.get("optional") or r["code"] in GATING_BLOCKED_CODES)]
    failed = [r["id"] + (f"/{r['viewport']}" if r.get("viewport") else "") for r in results
              if r["status"] == "failed" and not r.get("optional")]
    uncertain = [r["id"] for r in results if r["status"] == "uncertain"]
    warnings = [f"{r['id']} [{r['code']}]" for r in results
                if r.get("optional") and r["kind"] == "content" and r["status"] in ("blocked", "failed")]
    return {"blocking": blocking, "failed": failed, "uncertain": uncertain, "warnings": warnings}
