"""Start the skill self-install of a stdio server in the background (docs/agents-tasks.md §2.14,
docs/tools.md: "runs in background, never blocks the handshake").

Switches, any of which turns it off (they outrank the approval): ``--no-skill-install``,
``TIANSHU_MCP_NO_SKILL_INSTALL=1``, ``skills.autoInstall: false``. Approval (decision column
``approve``): ``--approve-skill-update`` or ``TIANSHU_MCP_APPROVE_SKILL_UPDATE=1``. The target is
``TIANSHU_MCP_SKILL_TARGET``, else ``skills.targetDir``, else ``~/.rivet/skills/tianshu-mcp``.
The source is the installed package's ``skills/tianshu-mcp`` — never the working directory.
"""

from __future__ import annotations

import importlib.resources
import logging
import os
import re
import shutil
import tempfile
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from .. import __version__
from ..core.i18n import resolve_locale
from ..core.settings import ServerConfig
from ..core.skill_install import SKILL_INSTALL_FAILED, SKILL_NAME, Mode, install_skill, log_result

log = logging.getLogger("tianshu_mcp")

TARGET_ENV = "TIANSHU_MCP_SKILL_TARGET"
NO_INSTALL_ENV = "TIANSHU_MCP_NO_SKILL_INSTALL"
APPROVE_ENV = "TIANSHU_MCP_APPROVE_SKILL_UPDATE"
DEFAULT_TARGET = Path("~") / ".rivet" / "skills" / SKILL_NAME


def env_on(value: str | None) -> bool:
    """True for a switch variable set to ``1``/``true``/``yes``/``on`` (any case); empty or
    ``0`` is off."""
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def skill_source_dir() -> Path:
    """``<package>/skills/tianshu-mcp`` of the installed ``tianshu_mcp`` package (by import path,
    never the cwd)."""
    return Path(str(importlib.resources.files("tianshu_mcp.skills") / SKILL_NAME))


@dataclass(frozen=True)
class SkillPlan:
    """What the switches decided: ``enabled`` (else ``why_off`` says which switch), the decision
    ``mode``, ``target`` (absolute, ``~`` expanded), ``source`` and ``backup_keep``."""

    enabled: bool
    why_off: str
    mode: Mode
    target: Path
    source: Path
    backup_keep: int


def plan(config: ServerConfig, *, no_install_flag: bool = False, approve_flag: bool = False,
         environ: Mapping[str, str] | None = None) -> SkillPlan:
    """Resolve the three switches, the approval, the mode and the target (pure but for
    ``~`` expansion)."""
    env = os.environ if environ is None else environ
    skills = config.skills
    why = ("--no-skill-install" if no_install_flag else f"{NO_INSTALL_ENV}=1" if env_on(env.get(NO_INSTALL_ENV))
           else "skills.autoInstall=false" if skills.auto_install is False else "")
    mode: Mode = ("approve" if approve_flag or env_on(env.get(APPROVE_ENV))
                  else "prompt" if skills.auto_install == "prompt" else "auto")
    raw = env.get(TARGET_ENV) or skills.target_dir or str(DEFAULT_TARGET)
    if not why and not os.path.isabs(os.path.expanduser(raw)):  # relative to what? never the cwd
        why = f"the skill target {raw!r} is not an absolute path"
    target = Path(os.path.abspath(os.path.expanduser(raw)))
    return SkillPlan(enabled=not why, why_off=why, mode=mode, target=target, source=skill_source_dir(),
                     backup_keep=skills.backup_keep)


_VARIANT = re.compile(r"^SKILL\.([A-Za-z]{2,3}(?:-[A-Za-z0-9]+)?)\.md$")
"""A language variant of the skill document beside ``SKILL.md`` (``SKILL.zh-CN.md``)."""


def localized_source(source: Path, locale: str, into: Path) -> Path:
    """Copy the skill tree ``source`` into ``into/<name>`` for ``locale`` and return that copy.

    The host loads ``SKILL.md``: for ``zh_CN`` it is the package's ``SKILL.zh-CN.md``, for ``en``
    (or a locale without a variant) the package's ``SKILL.md``. Language variants
    (``SKILL.<tag>.md``) are not copied, so the installed tree holds one document. Raises OSError.
    """
    dest = into / source.name
    shutil.copytree(source, dest, ignore=lambda _d, names: [n for n in names if _VARIANT.match(n)])
    variant = source / f"SKILL.{locale.replace('_', '-')}.md"
    if locale != "en" and variant.is_file():
        shutil.copyfile(variant, dest / "SKILL.md")
    return dest


def _run(p: SkillPlan) -> None:
    try:
        locale = resolve_locale()
        with tempfile.TemporaryDirectory(prefix="tianshu-skill-") as tmp:
            src = localized_source(p.source, locale, Path(tmp))
            result = install_skill(src, p.target, mode=p.mode, package_version=__version__, backup_keep=p.backup_keep,
                                   source_label=f"{p.source} ({locale})")
    except Exception as exc:  # noqa: BLE001 - a background helper never takes the server down
        log.warning("[%s] skill self-install into %s failed: %s: %s", SKILL_INSTALL_FAILED, p.target,
                    type(exc).__name__, exc)
        return
    log_result(result, log)


def start_skill_install(config: ServerConfig, *, no_install_flag: bool = False, approve_flag: bool = False,
                        environ: Mapping[str, str] | None = None) -> threading.Thread | None:
    """Start the self-install in a daemon thread and return it (None when a switch turns it
    off, logged at INFO). Never blocks and never raises; results go to the log (stderr and
    server.log), never stdout."""
    try:
        p = plan(config, no_install_flag=no_install_flag, approve_flag=approve_flag, environ=environ)
    except Exception as exc:  # noqa: BLE001
        log.warning("[%s] skill self-install not started: %s", SKILL_INSTALL_FAILED, exc)
        return None
    if not p.enabled:
        if p.why_off.startswith("the skill target"):
            log.warning("[%s] skill self-install not started: %s (set %s or skills.targetDir to an absolute path)",
                        SKILL_INSTALL_FAILED, p.why_off, TARGET_ENV)
        else:
            log.info("skill self-install is off (%s)", p.why_off)
        return None
    thread = threading.Thread(target=_run, args=(p,), name="tianshu-skill-install", daemon=True)
    thread.start()
    return thread
