"""The built-in Agent Client Protocol agents (issue 9 §3): agents that speak ACP on stdio, driven
by :mod:`.acp` (40-agents-tasks §1.7). Data only; :mod:`.profiles` merges them with the other
built-ins and the user's ``agent-profiles.json``.
"""

from __future__ import annotations

from typing import Any

from .builtin_cli import COMMON_BIN_DIRS, SYSTEM_BIN_DIRS

ACP_DOCS_TARGETED = "2026-11"
"""When the built-in ACP command lines were last checked against each agent's docs."""


def _acp_profile(display: str, names: list[str], args: list[str], auth: str, note: str) -> dict[str, Any]:
    return {
        "displayName": display,
        "type": "cli",
        "driver": "acp",
        "status": "ready",
        "command": None,
        "argsTemplate": args,
        "cwd": "task",
        "env": {},
        "authNote": auth,
        "note": note,
        "acp": {"permissions": {"insideProject": "allow", "outsideProject": "deny", "noLocation": "allow"}},
        "executableDiscovery": {
            "dirs": [*COMMON_BIN_DIRS, *SYSTEM_BIN_DIRS],
            "fileNames": names,
            "fallbackCommand": names[0],
        },
    }


def acp_builtin_data() -> dict[str, dict[str, Any]]:
    """The built-in ACP agents, keyed by agent id (``<agent>-acp``; the plain ids are the CLIs).

    ``gemini-acp`` (``gemini --acp``, Gemini CLI ≥ 0.50, where ``--experimental-acp`` became
    ``--acp``), ``claude-acp`` (``claude-agent-acp``, the ACP adapter over the Claude Agent SDK;
    its former name ``claude-code-acp`` is found too), ``codex-acp`` (``codex-acp``, the ACP
    adapter that runs the Codex app server), ``opencode-acp`` (``opencode acp``), ``qoder-acp``
    (``qodercli --acp``). Each is allowed to act inside the project and refused outside it.
    """
    return {
        "gemini-acp": _acp_profile(
            "Gemini CLI (ACP)", ["gemini"], ["--acp"], "log in once with `gemini` (Google account) or set GEMINI_API_KEY",
            "gemini --acp (Gemini CLI 0.50+, ACP over stdio; before 0.50 the flag was --experimental-acp)"),
        "claude-acp": _acp_profile(
            "Claude Code (ACP)", ["claude-agent-acp", "claude-code-acp"], [],
            "log in once with `claude` or set ANTHROPIC_API_KEY",
            "claude-agent-acp (npm @agentclientprotocol/claude-agent-acp; formerly @zed-industries/claude-code-acp)"),
        "codex-acp": _acp_profile(
            "Codex (ACP)", ["codex-acp"], [], "log in once with `codex login` or set OPENAI_API_KEY",
            "codex-acp (npm @agentclientprotocol/codex-acp, Homebrew codex-acp 0.9+)"),
        "opencode-acp": _acp_profile(
            "OpenCode (ACP)", ["opencode"], ["acp"], "log in once with `opencode auth login`",
            "opencode acp (answers auth_required when a provider needs a login)"),
        "qoder-acp": _acp_profile(
            "Qoder CLI (ACP)", ["qodercli"], ["--acp"], "log in once with `qodercli`",
            "qodercli --acp (Qoder CLI's ACP server mode)"),
    }
