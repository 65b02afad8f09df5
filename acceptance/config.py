"""Acceptance configuration: the three config layers, the derived checks, the resolved check set.

Source: docs/acceptance.md §2 (layers, merge, base check set, extraChecks, derived defaults). The check
and layer models and ``split_cmd`` (§1.1–§1.2) are in :mod:`.config_model` and re-exported here.
Deliberate deviation from §2.3: every registered toolchain derives its checks
(:mod:`.toolchains`), and a project's tests are **mandatory** whatever its language (pytest, go,
cargo, Maven, …; the original made all but npm scripts optional).

Plain Python: no Prefect, no adapters.
"""

from __future__ import annotations

import json
import logging
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Mapping, Sequence

from pydantic import ValidationError

from ..core.errors import ErrorCode
from ..core.i18n import _
from .config_model import (
    BASELINE_POLICIES,
    DEFAULT_BASELINE_POLICY,
    GLOBAL_FILE,
    MAX_CHECKS,
    PROJECT_DIR,
    PROJECT_FILE,
    SHELL_OPERATORS,
    AcceptanceCheck,
    AcceptanceConfig,
    AcceptanceConfigError,
    CheckDef,
    _format_validation,
    parse_layer,
    split_cmd,
    to_check_def,
)
from .toolchains.base import Derived
from .toolchains.pytest import detect_pytest  # noqa: F401 - part of this module's API
from .toolchains.registry import toolchains

log = logging.getLogger("tianshu_mcp")

__all__ = [
    "MAX_CHECKS",
    "SHELL_OPERATORS",
    "AcceptanceCheck",
    "AcceptanceConfig",
    "AcceptanceConfigError",
    "CheckDef",
    "ResolvedChecks",
    "split_cmd",
    "to_check_def",
    "parse_layer",
    "read_layer",
    "merge_configs",
    "resolve_layers",
    "derive_default_checks",
    "resolve_checks",
    "summarize_resolved",
    "global_layer_path",
    "project_layer_path",
    "BASELINE_POLICIES",
    "DEFAULT_BASELINE_POLICY",
]

MAX_LAYER_BYTES = 1 << 20  # an acceptance layer is a small JSON file


def read_layer_bytes(path: str | os.PathLike[str], layer: str) -> bytes | None:
    """The raw bytes of one acceptance layer file, None when it does not exist (ENOENT only).

    Raises:
        AcceptanceConfigError: ``CONFIG_UNREADABLE`` for any other read error (e.g. the path is a
            directory, a FIFO, larger than :data:`MAX_LAYER_BYTES`, no permission).
    """
    p = os.fspath(path)
    try:
        st = os.stat(p)
        if not stat.S_ISREG(st.st_mode):
            # port: a FIFO would block the round forever, /dev/zero would exhaust memory
            raise AcceptanceConfigError(ErrorCode.CONFIG_UNREADABLE,
                                        _("{layer} acceptance config {path} is not a regular file").format(
                                            layer=layer, path=p),
                                        layer=layer, path=p)
        if st.st_size > MAX_LAYER_BYTES:
            raise AcceptanceConfigError(ErrorCode.CONFIG_UNREADABLE,
                                        _("{layer} acceptance config {path} is larger than {n} bytes").format(
                                            layer=layer, path=p, n=MAX_LAYER_BYTES),
                                        layer=layer, path=p)
        with open(p, "rb") as fh:
            return fh.read(MAX_LAYER_BYTES + 1)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise AcceptanceConfigError(
            ErrorCode.CONFIG_UNREADABLE,
            _("{layer} acceptance config {path} cannot be read: {error}").format(layer=layer, path=p,
                                                                                 error=exc.strerror or exc),
            layer=layer,
            path=p,
        ) from exc


def parse_layer_bytes(raw: bytes, layer: str, path: str) -> AcceptanceConfig:
    """Decode (UTF-8, BOM allowed) and validate one layer's bytes.

    Raises:
        AcceptanceConfigError: ``CONFIG_INVALID`` for bad JSON or a schema violation.
    """
    try:
        data = json.loads(raw.decode("utf-8-sig"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise AcceptanceConfigError(
            ErrorCode.CONFIG_INVALID,
            _("{layer} acceptance config {path} is not valid JSON: {error}").format(layer=layer, path=path, error=exc),
            layer=layer,
            path=path,
        ) from exc
    return parse_layer(data, layer, path)


def read_layer(path: str | os.PathLike[str], layer: str) -> AcceptanceConfig | None:
    """Read one acceptance layer file (docs/acceptance.md §2.1 ``readAcceptanceLayer``).

    Returns:
        The parsed layer, or None when the file does not exist (ENOENT only).

    Raises:
        AcceptanceConfigError: ``CONFIG_UNREADABLE`` (:func:`read_layer_bytes`) or
            ``CONFIG_INVALID`` (:func:`parse_layer_bytes`). The message contains the layer label
            and the path.
    """
    raw = read_layer_bytes(path, layer)
    return None if raw is None else parse_layer_bytes(raw, layer, os.fspath(path))


@dataclass(frozen=True)
class PinnedRules:
    """The acceptance rules as they were at the task's baseline (docs/robustness.md §10: an agent rewrote
    the files it is judged by and passed). Made and stored by :mod:`.pinning`.

    Attributes:
        global_raw: bytes of ``<home>/acceptance.default.json``, None when it did not exist.
        project_raw: bytes of ``<project>/.tianshu-mcp/acceptance.json``, None when absent.
        project_verify: the projects.json ``verify`` entries, None when there were none.
        derived: the derived default checks (``CheckDef.to_json`` form) at the baseline.
        tool_dirs: the project's tool directories (``.venv/bin``, ``node_modules/.bin``) that
            existed at the baseline (None: unknown, use those that exist now).
    """

    global_raw: bytes | None
    project_raw: bytes | None
    project_verify: list[dict[str, Any]] | None = None
    derived: list[dict[str, Any]] = field(default_factory=list)
    tool_dirs: list[str] | None = None


def merge_configs(base: AcceptanceConfig, over: AcceptanceConfig) -> AcceptanceConfig:
    """Shallow merge (docs/acceptance.md §2.1): every key ``over`` defines replaces ``base``'s wholesale.

    ``checks`` lists replace (never concatenate); ``visual`` replaces (no deep merge).
    """
    merged = base.defined()
    merged.update(over.defined())
    return AcceptanceConfig.model_construct(**merged)


def global_layer_path(home: str | os.PathLike[str]) -> Path:
    """``<home>/acceptance.default.json``."""
    return Path(home) / GLOBAL_FILE


def project_layer_path(project: str | os.PathLike[str]) -> Path:
    """``<project>/.tianshu-mcp/acceptance.json``."""
    return Path(project) / PROJECT_DIR / PROJECT_FILE


def resolve_layers(
    project: str | os.PathLike[str] | None,
    home: str | os.PathLike[str],
    override: Mapping[str, Any] | AcceptanceConfig | None,
    pinned: PinnedRules | None = None,
) -> tuple[AcceptanceConfig, list[dict[str, str]]]:
    """Fold global → project → override (docs/acceptance.md §2.1 ``resolveAcceptanceLayers``).

    ``pinned`` replaces the global and project files with their content at the task's baseline.

    Returns:
        ``(merged, applied)`` where ``applied`` = ``[{"source", "path"}]`` for existing layers only.

    Raises:
        AcceptanceConfigError: from :func:`read_layer` / :func:`parse_layer`.
    """
    merged = AcceptanceConfig()
    applied: list[dict[str, str]] = []
    gpath = global_layer_path(home)
    if pinned is None:
        layer = read_layer(gpath, "global")
    else:
        layer = None if pinned.global_raw is None else parse_layer_bytes(
            pinned.global_raw, "global", f"{gpath} (as of the task's baseline)")
    if layer is not None:
        merged = merge_configs(merged, layer)
        applied.append({"source": "global", "path": str(gpath)})
    if project is not None:
        ppath = project_layer_path(project)
        if pinned is None:
            layer = read_layer(ppath, "project")
        else:
            label = f"{ppath} (as of the task's baseline)"
            layer = None if pinned.project_raw is None else parse_layer_bytes(pinned.project_raw, "project", label)
        if layer is not None:
            merged = merge_configs(merged, layer)
            applied.append({"source": "project", "path": str(ppath)})
    if override is not None:
        layer = override if isinstance(override, AcceptanceConfig) else parse_layer(override, "override", "acceptanceOverride")
        merged = merge_configs(merged, layer)
        applied.append({"source": "override", "path": "acceptanceOverride"})
    return merged, applied


# --------------------------------------------------------------------------------------------
# Derived defaults (§2.3, extended: every registered toolchain's ``detect``)
# --------------------------------------------------------------------------------------------


def derive_default_checks(project: str | os.PathLike[str]) -> tuple[list[CheckDef], list[str]]:
    """Default checks from the project's tech stack (docs/acceptance.md §2.3, extended).

    Every registered toolchain (:mod:`.toolchains.registry`, in its order) may derive checks:
    ``package.json`` scripts → ``npm run <s>`` for each of typecheck/lint/test/build (mandatory);
    else ``tsconfig.json`` → the optional ``typecheck-tsc``; a pytest project → ``pytest -q``
    (mandatory; the project's virtualenv pytest when present); ``go.mod`` → ``go-test``;
    ``Cargo.toml`` → ``cargo-test`` (port: tests gate the round whatever the language; the original
    made them optional); and the newer toolchains (Maven, Gradle, .NET, …), which also name the
    JUnit XML their runner writes (``junitXml``). A name already derived is not derived twice.

    Returns:
        ``(checks, notes)``; an empty project gives ``([], [])``. Never raises (a toolchain whose
        detection raises is logged and skipped).
    """
    root = Path(project)
    derived: list[Derived] = []
    notes: list[str] = []
    for tc in toolchains():
        if tc.detect is None:
            continue
        try:
            found, said = tc.detect(root, tuple(derived))
        except Exception as exc:  # noqa: BLE001 - one broken toolchain must not sink the others
            log.warning("toolchain %s: detection failed on %s: %s: %s", tc.id, root, type(exc).__name__, exc)
            continue
        names = {d.name for d in derived}
        derived += [d for d in found if d.name not in names]
        notes += said
    checks = [CheckDef.make(d.name, d.argv, optional=d.optional, junit_xml=d.junit_xml) for d in derived]
    return checks, notes


# --------------------------------------------------------------------------------------------
# Full resolution (§2.1 final values + §2.2 base set and extraChecks)
# --------------------------------------------------------------------------------------------


@dataclass
class ResolvedChecks:
    """Outcome of :func:`resolve_checks`.

    Attributes:
        checks: the command checks to run, in order (``git-diff-check`` is NOT included; the engine
            always runs it first).
        require_changes: the zero-change gate switch (default True).
        verify_concurrency: the merged layers' value 1..4, or None (inherit the server config).
        notes: notes for ``analysis.notes``, in the current locale (:mod:`~tianshu_mcp.core.i18n`).
        applied: ``[{"source": "global"|"project"|"override", "path"}]`` of existing layers.
        visual: the merged, still-unvalidated ``visual`` object, or None.
        config: the merged layer config.
        baseline_checks: run the command checks on the baseline too and grade against it
            (``baselineChecks``, default False).
        baseline_policy: ``baselinePolicy`` (default :data:`DEFAULT_BASELINE_POLICY`).
        test_integrity: ``testIntegrity`` (default ``protect``, docs/integrity.md).
        warnings: warnings for ``analysis.warnings`` (the task changed the project layer), in the
            current locale.
    """

    checks: list[CheckDef]
    require_changes: bool
    verify_concurrency: int | None
    notes: list[str]
    applied: list[dict[str, str]]
    visual: dict[str, Any] | None = None
    config: AcceptanceConfig = field(default_factory=AcceptanceConfig)
    baseline_checks: bool = False
    baseline_policy: str = DEFAULT_BASELINE_POLICY
    test_integrity: str = "protect"
    warnings: list[str] = field(default_factory=list)


def summarize_resolved(resolved: ResolvedChecks, checks_defined: bool | None = None) -> str:
    """One-line summary logged per round (``summarizeResolved``, docs/acceptance.md §2.1), English.

    Example: ``layers=global>project checks=2 requireChanges=true verifyConcurrency=(server config) visual=(not configured)``.
    """
    cfg = resolved.config
    layers = ">".join(a["source"] for a in resolved.applied) or "(none)"
    n_checks = str(len(cfg.checks)) if cfg.checks is not None else "(default set)"
    rc = str(cfg.require_changes).lower() if cfg.require_changes is not None else "(default true)"
    vc = str(cfg.verify_concurrency) if cfg.verify_concurrency is not None else "(server config)"
    vis = "overridden" if cfg.visual is not None else "(not configured)"
    out = f"layers={layers} checks={n_checks} requireChanges={rc} verifyConcurrency={vc} visual={vis}"
    if resolved.baseline_checks:
        out += f" baselineChecks=true baselinePolicy={resolved.baseline_policy}"
    return out


def resolve_checks(
    project: str | os.PathLike[str] | None,
    home: str | os.PathLike[str],
    override: Mapping[str, Any] | AcceptanceConfig | None,
    extra_checks: Sequence[AcceptanceCheck | CheckDef | Mapping[str, Any]] | None = None,
    checks_mode: Literal["append", "replace"] | str = "append",
    project_verify: Sequence[AcceptanceCheck | CheckDef | Mapping[str, Any]] | None = None,
    pinned: PinnedRules | None = None,
) -> ResolvedChecks:
    """Resolve the command checks and switches of one verify round (docs/acceptance.md §2.1–§2.3).

    Base set (skipped when ``checks_mode == "replace"`` and extra checks exist): merged layer
    ``checks`` when defined (even ``[]``), else ``project_verify`` (projects.json ``verify``) when
    non-empty, else :func:`derive_default_checks`. ``extra_checks`` are then appended.

    Args:
        project: project root (None in project-less mode: only global + override layers).
        home: data home holding ``acceptance.default.json``.
        override: the task's ``acceptanceOverride`` (raw dict) or None.
        extra_checks: verify_task ``extraChecks`` (raw dicts, models or CheckDefs).
        checks_mode: ``"append"`` (default) or ``"replace"``.
        project_verify: projects.json ``verify`` entries.
        pinned: the rules as of the task's baseline. An agent's round is judged by them: the
            global and project layers and projects.json ``verify`` come from the pin (a change the
            task made is reported in ``warnings`` and applies to later tasks), and derived checks
            are those derivable now plus those derivable at the baseline (the agent may add a
            toolchain, never remove one by deleting its files).

    Returns:
        :class:`ResolvedChecks`.

    Raises:
        AcceptanceConfigError: a layer is unreadable/invalid, or an extra/project check violates
            the schema (``CONFIG_INVALID``, layer ``extraChecks``/``projects.json``).
    """
    merged, applied = resolve_layers(project, home, override, pinned)
    notes: list[str] = []
    warnings = _pin_warnings(project, home, project_verify, pinned) if pinned is not None else []
    if pinned is not None:
        project_verify = pinned.project_verify
    extra = _normalise_list(extra_checks or [], "extraChecks", "extraChecks")
    has_extra = len(extra) > 0
    mode = checks_mode or "append"
    base: list[CheckDef] = []
    if not (mode == "replace" and has_extra):
        if merged.checks is not None:
            base = [to_check_def(c) for c in merged.checks]
            sources = "+".join(a["source"] for a in applied)
            notes.append(_("Using the checks of the acceptance config layers (effective layers {sources}, {n} "
                           "item(s)).").format(sources=sources, n=len(base)))
        elif project_verify:
            base = _normalise_list(project_verify, "projects.json", "projects.json verify")
            notes.append(_("Using the acceptance checks registered in the data home's projects.json ({n} item(s)).")
                         .format(n=len(base)))
        elif project is not None:
            derived, dnotes = derive_default_checks(project)
            base = derived
            notes.extend(dnotes)
            if pinned is not None:
                # the checks derived at the baseline run as they were then (a pytest the task put in a
                # new .venv is not the one that judges it); a toolchain the task added is derived now
                pinned_defs = [to_check_def(d) for d in pinned.derived]
                names = {d.name for d in pinned_defs}
                gone = sorted(names - {d.name for d in derived})
                base = pinned_defs + [d for d in derived if d.name not in names]
                if gone:
                    warnings.append(_("derived at the task's baseline but no longer derivable (kept: the task removed "
                                      "what they run): {checks}").format(checks=", ".join(gone)))
            notes.append(_("Using the default acceptance set (derived from the project's tech stack)."))
    checks = list(base)
    if has_extra:
        checks.extend(extra)
        if mode == "replace":
            notes.append(_("checksMode=replace: only the caller's extraChecks run (project/default checks skipped)."))
        else:
            notes.append(_("extraChecks appends {n} temporary check(s) (the base gate is not replaced).").format(
                n=len(extra)))
    return ResolvedChecks(
        checks=checks,
        require_changes=merged.require_changes if merged.require_changes is not None else True,
        verify_concurrency=merged.verify_concurrency,
        notes=notes,
        applied=applied,
        visual=merged.visual,
        config=merged,
        baseline_checks=bool(merged.baseline_checks),
        baseline_policy=merged.baseline_policy or DEFAULT_BASELINE_POLICY,
        test_integrity=merged.test_integrity or "protect",
        warnings=warnings,
    )


def _pin_warnings(project: str | os.PathLike[str] | None, home: str | os.PathLike[str],
                  project_verify: Sequence[Any] | None, pinned: PinnedRules) -> list[str]:
    """One warning per rule source the task changed since its baseline."""
    def now(path: Path, layer: str) -> bytes | None:
        try:
            return read_layer_bytes(path, layer)
        except AcceptanceConfigError:
            return b"\0unreadable"

    changed = []
    if now(global_layer_path(home), "global") != pinned.global_raw:
        changed.append(str(global_layer_path(home)))
    if project is not None and now(project_layer_path(project), "project") != pinned.project_raw:
        changed.append(str(project_layer_path(project)))
    if (list(project_verify) if project_verify else None) != pinned.project_verify:
        changed.append(_("the project's verify entry in projects.json"))
    return [_("the rules changed since the task started ({source}); this round was judged by them as they were "
              "then (the change applies to later tasks)").format(source=c) for c in changed]


def _normalise_list(items: Sequence[Any], layer: str, path: str) -> list[CheckDef]:
    out: list[CheckDef] = []
    for i, item in enumerate(items):
        try:
            out.append(to_check_def(item))
        except ValidationError as exc:
            raise AcceptanceConfigError(
                ErrorCode.CONFIG_INVALID,
                _("{layer} check #{i} ({path}) is invalid: {details}").format(layer=layer, i=i, path=path,
                                                                              details=_format_validation(exc)),
                layer=layer,
                path=path,
            ) from exc
    return out
