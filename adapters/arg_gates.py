"""run_task's agent-specific argument gates (docs/tools.md §1.3 step 8 and the project-less order).

Desktop agents take hints a CLI does not (``mode``, ``modelSource``, ``designDirection`` …) and
each accepts only its own; a hint sent to the wrong agent is refused with a coded
``INVALID_ARGUMENT`` error instead of being silently dropped. The vendor is the profile's
desktop adapter (``zcode-gui`` → ``zcode``), so a user profile with its own id and a built-in
adapter gets that adapter's gates; CLI and ACP agents have none (they accept ``mode``, like
TraeWork, and ignore it).
"""

from __future__ import annotations

import os
import re
from typing import Any

from ..core.errors import ErrorCode, TianshuError
from ..core.i18n import _
from .profiles import AgentProfile

VENDOR_NAMES = {"zcode": "ZCode", "codex": "Codex", "kimicode": "Kimi Code", "minimax": "MiniMax Code",
                "qoder": "Qoder CN", "opendesign": "Open Design", "traework": "TraeWork"}
"""Display names of the desktop adapters, as the gate messages say them."""

QODER_ONLY_REASONING = frozenset({"极高", "xhigh", "最大", "关闭思考"})
"""reasoningLevel aliases only the Qoder CN adapter understands (docs/tools.md §1.3)."""

_PROVIDER_MODEL = re.compile(r"^[^/\s]+/[^/\s].*$")


def vendor_of(profile: AgentProfile | None) -> str | None:
    """``zcode``, ``codex``, … for a desktop profile (its adapter without ``-gui``), None otherwise."""
    if profile is None or profile.driver != "gui":
        return None
    adapter = profile.effective_adapter or ""
    return adapter.removesuffix("-gui") or None


def _bad(message: str) -> None:
    raise TianshuError(ErrorCode.INVALID_ARGUMENT, message)


def check_agent_args(agent_id: str, profile: AgentProfile | None, args: dict[str, Any], project: str) -> None:
    """Refuse run_task arguments ``agent_id``'s adapter does not take (docs/tools.md §1.3 (8)).

    Args:
        agent_id: the resolved agent id (for the messages).
        profile: its profile.
        args: the run_task arguments (camelCase; None values count as absent).
        project: the normalised project path ("" project-less), for ``planDoc`` / ``designSystem``.

    Raises:
        TianshuError(INVALID_ARGUMENT): the first violated gate, in the spec's order.
    """
    vendor = vendor_of(profile)
    given = {k for k, v in args.items() if v is not None}
    if "allowCreateProject" in given and vendor != "zcode":
        _bad(_("allowCreateProject is ZCode-only; agent '{agentId}' does not support it. Remove it and retry.").format(
            agentId=agent_id))
    if "mode" in given and vendor in ("zcode", "codex", "kimicode", "minimax", "qoder", "opendesign"):
        _bad(_("{vendor} does not support the mode parameter; remove mode and retry.").format(vendor=VENDOR_NAMES[vendor]))
    if "modelSource" in given and vendor != "qoder":
        _bad(_("modelSource is a Qoder CN-only parameter"))
    if args.get("reasoningLevel") in QODER_ONLY_REASONING and vendor != "qoder":
        _bad(_("the reasoning level alias '{level}' is only supported by the Qoder CN adapter; use low, medium, high "
               "or max").format(level=args["reasoningLevel"]))
    if "designDirection" in given and vendor != "opendesign":
        _bad(_("designDirection is an Open Design-only parameter"))
    if vendor == "opendesign" and not str(args.get("designDirection") or "").strip():
        _bad(_("Open Design needs designDirection (the visual direction of the design)"))
    if "contextWindow" in given and vendor != "minimax":
        _bad(_("contextWindow is a MiniMax Code-only parameter"))
    if vendor == "zcode" and "model" in given and not _PROVIDER_MODEL.match(str(args["model"])):
        _bad(_("ZCode's model must be written provider/model (e.g. anthropic/claude-sonnet), got '{model}'").format(
            model=args["model"]))
    if vendor == "codex":
        for key in ("planDoc", "designSystem"):
            if key in given:
                path = str(args[key])
                full = path if os.path.isabs(path) else os.path.join(project, path)
                if not project and not os.path.isabs(path) or not os.path.isfile(full):
                    _bad(_("{key} must name an existing file (absolute or project-relative); '{path}' is not one").format(
                        key=key, path=path))


def check_project_less(agent_id: str, profile: AgentProfile | None, args: dict[str, Any]) -> None:
    """The project-less order of docs/tools.md §1.3, after the agent resolved: only ZCode works in its
    default workspace, and then without verification, rework, mode, acceptanceOverride or dryRun.

    Raises:
        TianshuError(INVALID_ARGUMENT): the first violated rule.
    """
    if vendor_of(profile) != "zcode":
        _bad(_("agent '{agentId}' needs projectPath; project-less dispatch is only supported for ZCode (its default "
               "workspace). Give projectPath or use agentId=zcode.").format(agentId=agent_id))
    if args.get("autoVerify") is True:
        _bad(_("project-less dispatch does not support autoVerify=true: there is no project to verify"))
    if (args.get("autoFixRounds") or 0) > 0:
        _bad(_("project-less dispatch does not support autoFixRounds>0: without verification there is nothing to rework"))
    if args.get("mode") is not None:
        _bad(_("{vendor} does not support the mode parameter; remove mode and retry.").format(vendor="ZCode"))
    if args.get("acceptanceOverride") is not None:
        _bad(_("project-less dispatch does not support acceptanceOverride: there is no project to verify"))
    if args.get("dryRun") is True:
        _bad(_("project-less dispatch does not support dryRun: there is no project to plan against"))
