"""Cross-field rules 1–8 of the ``visual`` config block (docs/visual.md §1).

:func:`first_rule_violation` applies them, in rule order, to a structurally valid
:class:`~.config_models.VisualConfig` and names the JSON path of the first problem;
:func:`content_checks` lists every declared content check. The value rules live in
:mod:`.config_rules`.
"""

from __future__ import annotations

from typing import Any, Iterator

from .config_rules import PLACEHOLDERS, unknown_placeholders

# the cross-field rules take a VisualConfig (and yield its ContentChecks) as ``Any``: config_models
# imports this module, and a type-only import back would still be an import cycle
VisualConfig = Any
ContentCheck = Any


def content_checks(cfg: VisualConfig) -> Iterator[tuple[str, str, ContentCheck]]:
    """Every declared content check as ``(json_path, label, check)``: ``contents[]`` first (label =
    rule id), then page contents (label ``<page.id> (page content)``) — the order of §2 step 2."""
    for i, rule in enumerate(cfg.contents):
        yield f"visual.contents[{i}]", rule.id, rule
    for i, page in enumerate(cfg.pages):
        if page.content is not None:
            yield f"visual.pages[{i}].content", f"{page.id} (page content)", page.content


def first_rule_violation(cfg: VisualConfig) -> tuple[str, str] | None:
    """The first violated cross-field rule of docs/visual.md §1 (checked in rule order 1–8) as
    ``(json_path, English message)``, or None when the config is consistent."""
    for check in (_rule1, _rule2, _rule3, _rule4, _rule5, _rule6, _rule7, _rule8):
        found = check(cfg)
        if found is not None:
            return found
    return None


def _rule1(cfg: VisualConfig) -> tuple[str, str] | None:
    if cfg.enabled and not (cfg.pages or cfg.images or cfg.contents):
        return "visual.enabled", "enabled visual acceptance needs at least one page, image or content rule"
    return None


def _rule2(cfg: VisualConfig) -> tuple[str, str] | None:
    if cfg.content.enabled is not True:
        for path, label, _ in content_checks(cfg):
            return path, f"{label}: content checks need visual.content.enabled = true (even when visual is disabled)"
    return None


def _rule3(cfg: VisualConfig) -> tuple[str, str] | None:
    templates = [("visual.content.argsTemplate", "content", cfg.content.argsTemplate)]
    templates += [(f"{p}.argsTemplate", label, c.argsTemplate) for p, label, c in content_checks(cfg)]
    for path, label, template in templates:
        for j, token in enumerate(template or []):
            bad = unknown_placeholders(token)
            if bad:
                return (f"{path}[{j}]", f"{label}: unknown placeholder {bad[0]} (allowed: {', '.join(PLACEHOLDERS)})")
    return None


def _rule4(cfg: VisualConfig) -> tuple[str, str] | None:
    g = cfg.content
    if not g.enabled:
        return None
    for path, label, c in content_checks(cfg):
        command = c.command if c.command is not None else g.command
        template = c.argsTemplate if c.argsTemplate is not None else g.argsTemplate
        if command is None:
            return f"{path}.command", f"{label}: no judge command (set it here or in visual.content.command)"
        if template is None:
            return f"{path}.argsTemplate", f"{label}: no argsTemplate (set it here or in visual.content.argsTemplate)"
        allow = c.allowRemote if c.allowRemote is not None else g.allowRemote
        if any("<image:base64:file>" in t for t in template) and allow is not True:
            return f"{path}.allowRemote", f"{label}: <image:base64:file> requires allowRemote = true"
        samples = c.samples if c.samples is not None else g.samples
        if samples * g.timeoutMs > cfg.limits.roundTimeoutMs:
            return (f"{path}.samples", f"{label}: samples ({samples}) x content.timeoutMs ({g.timeoutMs} ms) exceeds "
                                       f"limits.roundTimeoutMs ({cfg.limits.roundTimeoutMs} ms)")
    return None


def _rule5(cfg: VisualConfig) -> tuple[str, str] | None:
    seen: set[str] = set()
    for i, vp in enumerate(cfg.viewports):
        if vp.id.lower() in seen:
            return f"visual.viewports[{i}].id", f"duplicate viewport id '{vp.id}' (ids are case-insensitive)"
        seen.add(vp.id.lower())
    seen = set()
    ids = [("pages", i, p.id) for i, p in enumerate(cfg.pages)] + [("images", i, m.id) for i, m in enumerate(cfg.images)]
    for kind, i, ident in ids + [("contents", i, c.id) for i, c in enumerate(cfg.contents)]:
        if ident.lower() in seen:
            return f"visual.{kind}[{i}].id", f"duplicate id '{ident}' among pages, images and contents (case-insensitive)"
        seen.add(ident.lower())
    return None


def _rule6(cfg: VisualConfig) -> tuple[str, str] | None:
    declared = {x.lower() for x in [*(v.id for v in cfg.viewports), *(p.id for p in cfg.pages),
                                    *(m.id for m in cfg.images), *(c.id for c in cfg.contents)]}
    derived: set[str] = set()
    for i, page in enumerate(cfg.pages):
        if page.content is None:
            continue
        did = f"{page.id}-content".lower()
        if did in declared or did in derived:
            return (f"visual.pages[{i}].content",
                    f"the page content id '{page.id}-content' collides with another id (case-insensitive)")
        derived.add(did)
    return None


def _rule7(cfg: VisualConfig) -> tuple[str, str] | None:
    d = cfg.defaults
    if d.capture == "element" and d.selector is None:
        return "visual.defaults.selector", "defaults.capture 'element' requires defaults.selector"
    known = {vp.id for vp in cfg.viewports}
    for i, page in enumerate(cfg.pages):
        capture = page.capture if page.capture is not None else d.capture
        if capture == "element" and page.selector is None and d.selector is None:
            return f"visual.pages[{i}].selector", f"{page.id}: element capture requires a selector"
        seen: set[str] = set()
        for j, vid in enumerate(page.viewports or []):
            if vid not in known:
                return f"visual.pages[{i}].viewports[{j}]", f"{page.id}: unknown viewport '{vid}'"
            if vid in seen:
                return f"visual.pages[{i}].viewports[{j}]", f"{page.id}: duplicate viewport '{vid}'"
            seen.add(vid)
    return None


def _rule8(cfg: VisualConfig) -> tuple[str, str] | None:
    for i, page in enumerate(cfg.pages):
        if page.pixel:
            continue
        if page.content is None:
            return f"visual.pages[{i}].pixel", f"{page.id}: pixel = false requires content"
        for key in ("baseline", "pixelThreshold", "maxDiffRatio"):
            if getattr(page, key) is not None:
                return f"visual.pages[{i}].{key}", f"{page.id}: {key} is not allowed when pixel = false"
    return None
