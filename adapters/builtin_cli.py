"""The built-in CLI agents (issue 9): each CLI's current non-interactive command line as profile
data (40-agents-tasks §1.7). :mod:`.profiles` merges them with the other built-ins and the user's
``agent-profiles.json`` (a user entry of the same id replaces the whole profile).
"""

from __future__ import annotations

from typing import Any

COMMON_BIN_DIRS: tuple[str, ...] = (
    "{HOME}/.local/bin",
    "{HOME}/.npm-global/bin",
    "{HOME}/.nvm/versions/node",
    "{HOME}/.volta/bin",
    "{HOME}/.bun/bin",
)
"""Per-user install directories the built-in CLI profiles search (``executableDiscovery.dirs``)
when the command is not on the server's PATH: pipx/uv/installer scripts, npm's documented
``~/.npm-global`` prefix, every nvm-managed Node (``.../<version>/bin``, newest file wins), Volta,
Bun. ``{HOME}`` is a placeholder (see :func:`expand_discovery_dir`)."""

SYSTEM_BIN_DIRS: tuple[str, ...] = ("/usr/local/bin", "/opt/homebrew/bin")
"""System install directories searched after :data:`COMMON_BIN_DIRS`: a GUI-launched MCP host
(launchd, a desktop session) often starts the server with a PATH that lacks them."""

CLI_DOCS_TARGETED = "2026-08"
"""When the built-in CLI command lines were last checked against each CLI's docs and source."""


def _cli_profile(display: str, command: str, args: list[str], prompt_mode: str, auth: str, note: str,
                 fatal: list[str], extra_dirs: tuple[str, ...] = ()) -> dict[str, Any]:
    return {
        "displayName": display,
        "type": "cli",
        "driver": "spawn",
        "status": "ready",
        "command": None,
        "argsTemplate": args,
        "promptMode": prompt_mode,
        "cwd": "task",
        "env": {},
        "authNote": auth,
        "fatalPatterns": fatal,
        "note": note,
        "executableDiscovery": {
            "dirs": [*extra_dirs, *COMMON_BIN_DIRS, *SYSTEM_BIN_DIRS],
            "fileNames": [command],
            "fallbackCommand": command,
        },
    }


def cli_builtin_data() -> dict[str, dict[str, Any]]:
    """The built-in CLI agents (issue 9): each CLI's current non-interactive command line.

    Sources and versions are in each profile's ``note``; the reasons for every flag are in
    docs/design-notes.md ("Built-in CLI agents"). A user entry of the same id in
    ``agent-profiles.json`` replaces the whole profile.
    """
    return {
        "codex": _cli_profile(
            "Codex CLI", "codex",
            ["exec", "--skip-git-repo-check", "--sandbox", "workspace-write", "--", "<prompt:arg>"], "arg",
            "reuses the ~/.codex login (codex login) or OPENAI_API_KEY",
            "codex exec, checked against openai/codex codex-rs/exec/src/cli.rs as stored 2026-08 and the "
            "non-interactive docs (codex-cli >= 0.128): --full-auto was removed (a hidden flag that only warns), --sandbox workspace-write lets it edit "
            "the project; the prompt follows -- so a brief starting with '-' (or reading 'resume'/'review') "
            "stays the prompt; stdin is /dev/null, else codex exec would wait to append it",
            [r"you'?ve hit your usage limit", r"(access|refresh) token.{0,60}(expired|could not be refreshed|already used|revoked)"],
        ),
        "claude": _cli_profile(
            "Claude Code", "claude",
            ["-p", "--permission-mode", "acceptEdits", "--output-format", "text", "--", "<prompt:arg>"], "arg",
            "reuses the Claude Code login (claude, then /login; ~/.claude) or ANTHROPIC_API_KEY",
            "claude -p (print mode), checked against the Claude Code docs (headless / CLI reference) and "
            "anthropics/claude-code CHANGELOG 2.1.240 (2026-08): acceptEdits lets it edit files without a "
            "permission prompt (other tools stay denied in print mode), text output is the final answer; "
            "the prompt follows -- (a leading '-' is otherwise an unknown option)",
            [r"usage limit reached", r"you'?ve hit your (usage )?limit",
             r"oauth (session|token).{0,40}(expired|could not be refreshed|revoked)"],
            ("{HOME}/.claude/local",),
        ),
        "gemini": _cli_profile(
            "Gemini CLI", "gemini",
            ["--approval-mode", "auto_edit", "--skip-trust", "--prompt=<prompt:arg>"], "arg",
            "reuses the Gemini CLI login (~/.gemini: Google sign-in, GEMINI_API_KEY or Vertex AI)",
            "gemini -p (headless), checked against google-gemini/gemini-cli packages/cli/src/config/config.ts "
            "(v0.56.0, 2026-08): --approval-mode auto_edit approves edit tools; --skip-trust trusts the "
            "project for this run (headless gemini otherwise exits in an untrusted folder and any approval "
            "mode falls back to default); --prompt=<brief> as one argument so a leading '-' cannot become a flag",
            [r"not running in a trusted directory", r"please set an auth method",
             r"must specify the GEMINI_API_KEY", r"approval mode overridden to .default. because the current folder is not trusted"],
        ),
        "aider": _cli_profile(
            "Aider", "aider",
            ["--yes-always", "--no-auto-commits", "--no-check-update", "--no-show-release-notes",
             "--no-analytics", "--message-file", "<prompt:file>"], "file",
            "reuses aider's own configuration: provider API keys in the environment, ~/.aider.conf.yml or "
            "the project's .env",
            "aider --message-file, checked against Aider-AI/aider aider/args.py (0.86.x, 2026-05): "
            "--yes-always (the old --yes is gone; argparse still accepts it as an abbreviation), "
            "--no-auto-commits leaves the edits uncommitted like every other agent (its commits would "
            "still be counted: the verifier diffs the baseline commit against the working tree) and "
            "also stops the commit of the user's dirty files; --no-check-update, --no-show-release-notes "
            "and --no-analytics keep --yes-always from installing an upgrade, opening a browser or opting "
            "in to analytics; the brief is read from prompt-<round>.txt (no size limit, no flag parsing)",
            [r"api provider is not able to authenticate you", r"no llm model was specified and no api keys",
             r"missing these environment variables", r"litellm\.(AuthenticationError|PermissionDeniedError)"],
        ),
        "opencode": _cli_profile(
            "opencode", "opencode",
            ["run"], "stdin",
            "reuses the opencode login (opencode auth login; ~/.local/share/opencode/auth.json) or provider keys",
            "opencode run, checked against anomalyco/opencode (formerly sst/opencode) "
            "packages/opencode/src/cli/cmd/run.ts (1.18.x, 2026-08): the brief goes on stdin, which run reads "
            "to EOF when it is not a terminal; as an argument it would be re-quoted (\"...\") and could be "
            "taken for a flag; permissions the config leaves at 'ask' are auto-rejected in run (edits are "
            "allowed by default; --auto would approve everything)",
            [r"ProviderAuthError", r"ProviderInitError", r"you must provide a message or a command"],
            ("{HOME}/.opencode/bin",),
        ),
        "qwen": _cli_profile(
            "Qwen Code", "qwen",
            ["--approval-mode", "auto-edit", "--prompt=<prompt:arg>"], "arg",
            "reuses the Qwen Code login (~/.qwen: Qwen OAuth or an OpenAI-compatible API key)",
            "qwen -p (headless), checked against the Qwen Code docs (headless mode, approval mode; "
            "@qwen-code/qwen-code 0.18.x, 2026-06) and QwenLM/qwen-code packages/cli/src/config/config.ts: "
            "--approval-mode auto-edit approves edit tools (default mode fails tools that need approval "
            "headless); --prompt=<brief> as one argument so a leading '-' cannot become a flag",
            [r"please set an auth method", r"approval mode overridden to .default. because the current folder is not trusted"],
        ),
    }
