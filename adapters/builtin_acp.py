"""The built-in Agent Client Protocol agents (docs/agent-adapters.md §3): agents that speak ACP on stdio,
driven by :mod:`.acp` (docs/agents-tasks.md §1.7). Data only; :mod:`.profiles` merges them with the other
built-ins and the user's ``agent-profiles.json``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .builtin_cli import COMMON_BIN_DIRS, SYSTEM_BIN_DIRS

GEMINI_ACP_SETTINGS = Path(__file__).resolve().parent / "data" / "gemini-acp-system-settings.json"
"""Gemini CLI system settings of the ``gemini-acp`` profile: ``general.maxAttempts`` only
(docs/real-agents.md)."""

ACP_DOCS_TARGETED = "2026-11"
"""When the built-in ACP command lines were last checked against each agent's docs."""


def _acp_profile(display: str, names: list[str], args: list[str], auth: str, note: str, **facts: Any) -> dict[str, Any]:
    """One built-in ACP profile; ``facts`` are further profile keys in their JSON spelling
    (docs/real-agents.md)."""
    env = facts.pop("env", {})
    return {**facts,
        "displayName": display,
        "type": "cli",
        "driver": "acp",
        "status": "ready",
        "command": None,
        "argsTemplate": args,
        "cwd": "task",
        "env": env,
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
            "gemini --acp (Gemini CLI 0.50+, ACP over stdio; before 0.50 the flag was --experimental-acp). In ACP "
            "mode it reports no retry and holds its stderr until it exits (0.61.0), so a 429 would be retried for "
            "about 3 minutes unseen: GEMINI_CLI_SYSTEM_SETTINGS_PATH names a settings file of ours with only "
            "general.maxAttempts = 3 (merged over the user's settings), and a 401/429 ends the turn in seconds",
            env={"GEMINI_CLI_SYSTEM_SETTINGS_PATH": str(GEMINI_ACP_SETTINGS)},
            testedVersions="==0.61.*", nodeVersions=">=20",
            authSources=[{"env": "GEMINI_API_KEY", "note": "API key"}, {"env": "GOOGLE_API_KEY", "note": "API key"},
                         {"file": "~/.gemini/oauth_creds.json", "note": "Google sign-in"}]),
        "claude-acp": _acp_profile(
            "Claude Code (ACP)", ["claude-agent-acp", "claude-code-acp"], [],
            "log in once with `claude` or set ANTHROPIC_API_KEY",
            "claude-agent-acp (npm @agentclientprotocol/claude-agent-acp; formerly @zed-industries/claude-code-acp). "
            "As root it refuses to start a session unless IS_SANDBOX=1 (its permission bypass is refused for root "
            "otherwise); it reports no retry to an ACP client, so Claude Code's own retries are bounded to 3 "
            "(CLAUDE_CODE_MAX_RETRIES): a bad key or an exhausted quota ends the round in seconds, not minutes",
            env={"CLAUDE_CODE_MAX_RETRIES": "3"}, rootEnv={"IS_SANDBOX": "1"}, testedVersions="==0.101.*",
            nodeVersions=">=22",
            authSources=[{"env": "ANTHROPIC_API_KEY", "note": "API key"},
                         {"env": "ANTHROPIC_AUTH_TOKEN", "note": "gateway token"},
                         {"file": "~/.claude/.credentials.json", "note": "Claude login (claude, then /login)"}]),
        "codex-acp": _acp_profile(
            "Codex (ACP)", ["codex-acp"], [], "log in once with `codex login` or set OPENAI_API_KEY",
            "codex-acp (npm @agentclientprotocol/codex-acp, Homebrew codex-acp 0.9+). INITIAL_AGENT_MODE="
            "workspace-write: its default mode ('agent', auto review) asks the model, not the client, before acting "
            "outside the project, which would bypass this profile's permission policy",
            env={"INITIAL_AGENT_MODE": "workspace-write"}, testedVersions="==2.6.*",
            authSources=[{"env": "CODEX_API_KEY", "note": "API key"}, {"env": "OPENAI_API_KEY", "note": "API key"},
                         {"file": "~/.codex/auth.json", "note": "Codex login (codex login)"}]),
        "opencode-acp": _acp_profile(
            "OpenCode (ACP)", ["opencode"], ["acp"], "log in once with `opencode auth login`",
            "opencode acp (answers auth_required when a provider needs a login; a rejected key or a quota "
            "comes back as an internal error carrying the provider's message)",
            testedVersions="==1.18.*",
            authSources=[{"file": "~/.local/share/opencode/auth.json", "note": "opencode login (opencode auth login)"},
                         {"file": "~/.config/opencode/opencode.json", "note": "provider options in the opencode config"}]),
        "qoder-acp": _acp_profile(
            "Qoder CLI (ACP)", ["qodercli"], ["--acp"], "log in once with `qodercli`",
            "qodercli --acp (Qoder CLI's ACP server mode)"),
    }
