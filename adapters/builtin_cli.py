"""The built-in CLI agents (docs/agent-adapters.md): each CLI's current non-interactive command line as
profile data (docs/agents-tasks.md §1.7). :mod:`.profiles` merges them with the other built-ins and the user's
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
                 fatal: list[str], extra_dirs: tuple[str, ...] = (), **facts: Any) -> dict[str, Any]:
    """One built-in CLI profile; ``facts`` are further profile keys in their JSON spelling
    (``outputFormat``, ``testedVersions``, ``authSources``, …, docs/real-agents.md)."""
    env = facts.pop("env", {})
    return {**facts,
        "displayName": display,
        "type": "cli",
        "driver": "spawn",
        "status": "ready",
        "command": None,
        "argsTemplate": args,
        "promptMode": prompt_mode,
        "cwd": "task",
        "env": env,
        "authNote": auth,
        "fatalPatterns": fatal,
        "note": note,
        "executableDiscovery": {
            "dirs": [*extra_dirs, *COMMON_BIN_DIRS, *SYSTEM_BIN_DIRS],
            "fileNames": [command],
            "fallbackCommand": command,
        },
    }


GEMINI_EXIT_CODES: dict[str, str] = {
    "41": "invalid auth method: with GOOGLE_GEMINI_BASE_URL set, ~/.gemini/settings.json must select one "
          "(security.auth.selectedType, e.g. gemini-api-key with GEMINI_API_KEY)",
    "42": "input error: no brief reached the CLI, or options that cannot be combined",
    "44": "sandbox error",
    "52": "configuration error: ~/.gemini/settings.json or a GEMINI_* variable is invalid",
    "53": "the session's turn limit was reached (model.maxSessionTurns in settings.json)",
    "54": "a tool failed fatally",
    "55": "the folder is not trusted (--skip-trust or GEMINI_CLI_TRUST_WORKSPACE=true)",
    "130": "cancelled",
    "145": "the model API answered 401 (with JSON output the exit code is the HTTP status mod 256)",
    "147": "the model API answered 403 (HTTP status mod 256)",
    "173": "the model API answered 429 after its retries (HTTP status mod 256)",
    "244": "the model API answered 500 after its retries (HTTP status mod 256)",
}
"""What Gemini CLI 0.61's exit codes mean (packages/core exit codes, each provoked against the
scripted endpoint, docs/real-agents.md)."""


def _env(name: str, note: str) -> dict[str, str]:
    return {"env": name, "note": note}


def _file(path: str, note: str) -> dict[str, str]:
    return {"file": path, "note": note}


def cli_builtin_data() -> dict[str, dict[str, Any]]:
    """The built-in CLI agents (docs/agent-adapters.md): each CLI's current non-interactive command line.

    Sources and versions are in each profile's ``note``; the reasons for every flag are in
    docs/design-notes.md ("Built-in CLI agents"). A user entry of the same id in
    ``agent-profiles.json`` replaces the whole profile.
    """
    return {
        "codex": _cli_profile(
            "Codex CLI", "codex",
            ["exec", "--json", "--skip-git-repo-check", "--sandbox", "workspace-write", "--", "<prompt:arg>"], "arg",
            "reuses the ~/.codex login (codex login) or OPENAI_API_KEY",
            "codex exec, checked against openai/codex codex-rs/exec/src/cli.rs as stored 2026-08 and the "
            "non-interactive docs (codex-cli >= 0.128): --full-auto was removed (a hidden flag that only warns), --sandbox workspace-write lets it edit "
            "the project; the prompt follows -- so a brief starting with '-' (or reading 'resume'/'review') "
            "stays the prompt; stdin is /dev/null, else codex exec would wait to append it",
            [r"you'?ve hit your usage limit", r"(access|refresh) token.{0,60}(expired|could not be refreshed|already used|revoked)"],
            outputFormat="codex-json", testedVersions="==0.171.*",
            authSources=[_env("CODEX_API_KEY", "API key"), _env("OPENAI_API_KEY", "API key"),
                         _file("~/.codex/auth.json", "Codex login (codex login)")],
        ),
        "claude": _cli_profile(
            "Claude Code", "claude",
            ["-p", "--permission-mode", "acceptEdits", "--output-format", "stream-json", "--verbose", "--",
             "<prompt:arg>"], "arg",
            "reuses the Claude Code login (claude, then /login; ~/.claude) or ANTHROPIC_API_KEY",
            "claude -p (print mode), checked against the Claude Code docs (headless / CLI reference) and "
            "anthropics/claude-code CHANGELOG 2.1.240 (2026-08): acceptEdits lets it edit files without a "
            "permission prompt (other tools stay denied in print mode), text output is the final answer; "
            "the prompt follows -- (a leading '-' is otherwise an unknown option)",
            [r"usage limit reached", r"you'?ve hit your (usage )?limit",
             r"oauth (session|token).{0,40}(expired|could not be refreshed|revoked)"],
            ("{HOME}/.claude/local",),
            outputFormat="claude-stream-json", testedVersions="==2.1.*",
            authSources=[_env("ANTHROPIC_API_KEY", "API key"), _env("ANTHROPIC_AUTH_TOKEN", "gateway token"),
                         _env("CLAUDE_CODE_OAUTH_TOKEN", "Claude login token"),
                         _file("~/.claude/.credentials.json", "Claude login (claude, then /login)")],
        ),
        "gemini": _cli_profile(
            "Gemini CLI", "gemini",
            ["--approval-mode", "auto_edit", "--skip-trust", "--output-format", "stream-json", "--prompt=<prompt:arg>"],
            "arg",
            "reuses the Gemini CLI login (~/.gemini: Google sign-in, GEMINI_API_KEY or Vertex AI)",
            "gemini -p (headless), checked against google-gemini/gemini-cli packages/cli/src/config/config.ts "
            "(v0.56.0, 2026-08): --approval-mode auto_edit approves edit tools; --skip-trust trusts the "
            "project for this run (headless gemini otherwise exits in an untrusted folder and any approval "
            "mode falls back to default); --prompt=<brief> as one argument so a leading '-' cannot become a flag",
            [r"not running in a trusted directory", r"please set an auth method",
             r"must specify the GEMINI_API_KEY", r"approval mode overridden to .default. because the current folder is not trusted",
             r"invalid auth method selected"],
            outputFormat="gemini-stream-json", testedVersions="==0.61.*", nodeVersions=">=20",
            exitCodes=GEMINI_EXIT_CODES,
            authSources=[_env("GEMINI_API_KEY", "API key"), _env("GOOGLE_API_KEY", "API key (Vertex AI)"),
                         _file("~/.gemini/oauth_creds.json", "Google sign-in"),
                         _file("~/.gemini/settings.json", "Gemini CLI settings (security.auth.selectedType)")],
        ),
        "aider": _cli_profile(
            "Aider", "aider",
            ["--yes-always", "--no-auto-commits", "--no-check-update", "--no-show-release-notes",
             "--no-analytics", "--no-gitignore", "--no-show-model-warnings", "--message-file", "<prompt:file>"], "file",
            "reuses aider's own configuration: provider API keys in the environment, ~/.aider.conf.yml or "
            "the project's .env",
            "aider --message-file, checked against Aider-AI/aider aider/args.py (0.86.x, 2026-05): "
            "--yes-always (the old --yes is gone; argparse still accepts it as an abbreviation), "
            "--no-auto-commits leaves the edits uncommitted like every other agent (its commits would "
            "still be counted: the verifier diffs the baseline commit against the working tree) and "
            "also stops the commit of the user's dirty files; --no-check-update, --no-show-release-notes "
            "and --no-analytics keep --yes-always from installing an upgrade, opening a browser or opting "
            "in to analytics; --no-gitignore keeps it from adding .aider* to the project's .gitignore and "
            "--no-show-model-warnings from answering 'open the docs?' with yes for an unknown model (both checked "
            "with 0.86.2, 2026-12); the brief is read from prompt-<round>.txt (no size limit, no flag parsing); "
            "aider exits 0 after a rejected key or an exhausted quota, hence the patterns; its chat history and "
            "tag cache (.aider*) are its own files, never the agent's change",
            [r"api provider is not able to authenticate you", r"no llm model was specified and no api keys",
             r"missing these environment variables", r"litellm\.(AuthenticationError|PermissionDeniedError|RateLimitError)",
             r"api provider has rate limited you"],
            ownedPaths=[".aider*"], testedVersions="==0.86.*",
            authSources=[_env("AIDER_OPENAI_API_KEY", "API key"), _env("OPENAI_API_KEY", "API key"),
                         _env("ANTHROPIC_API_KEY", "API key"), _env("GEMINI_API_KEY", "API key"),
                         _file("~/.aider.conf.yml", "aider configuration"), _file(".env", "the project's .env")],
        ),
        "opencode": _cli_profile(
            "opencode", "opencode",
            ["run", "--format", "json", "--dir", "<cwd>"], "stdin",
            "reuses the opencode login (opencode auth login; ~/.local/share/opencode/auth.json) or provider keys",
            "opencode run, checked against anomalyco/opencode (formerly sst/opencode) "
            "packages/opencode/src/cli/cmd/run.ts (1.18.x, 2026-08): the brief goes on stdin, which run reads "
            "to EOF when it is not a terminal; as an argument it would be re-quoted (\"...\") and could be "
            "taken for a flag; permissions the config leaves at 'ask' are auto-rejected in run (edits are "
            "allowed by default; --auto would approve everything). run takes its project from $PWD, not its "
            "working directory (1.18.33): --dir names it and PWD is set to it; OPENCODE_PERMISSION states the "
            "stance (edits allowed, paths outside the project denied) instead of a silent auto-reject; "
            "--format json reports tool calls, tokens and cost per step",
            [r"ProviderAuthError", r"ProviderInitError", r"you must provide a message or a command",
             r"permission requested: .{0,200}auto-rejecting", r"rejected permission to use this specific tool call"],
            ("{HOME}/.opencode/bin",),
            env={"OPENCODE_PERMISSION": '{"edit": "allow", "external_directory": "deny"}'},
            outputFormat="opencode-json", testedVersions="==1.18.*",
            authSources=[_file("~/.local/share/opencode/auth.json", "opencode login (opencode auth login)"),
                         _file("~/.config/opencode/opencode.json", "provider options in the opencode config")],
        ),
        "qwen": _cli_profile(
            "Qwen Code", "qwen",
            ["--approval-mode", "auto-edit", "--output-format", "stream-json", "--prompt=<prompt:arg>"], "arg",
            "reuses the Qwen Code login (~/.qwen: Qwen OAuth or an OpenAI-compatible API key)",
            "qwen -p (headless), checked against the Qwen Code docs (headless mode, approval mode; "
            "@qwen-code/qwen-code 0.18.x, 2026-06) and QwenLM/qwen-code packages/cli/src/config/config.ts: "
            "--approval-mode auto-edit approves edit tools (default mode fails tools that need approval "
            "headless); --prompt=<brief> as one argument so a leading '-' cannot become a flag",
            [r"please set an auth method", r"approval mode overridden to .default. because the current folder is not trusted",
             r"no auth type is selected"],
            outputFormat="qwen-stream-json", testedVersions="==0.24.*", nodeVersions=">=22",
            authSources=[_env("OPENAI_API_KEY", "OpenAI-compatible API key"), _env("DASHSCOPE_API_KEY", "API key"),
                         _file("~/.qwen/oauth_creds.json", "Qwen OAuth login"),
                         _file("~/.qwen/settings.json", "Qwen Code settings")],
        ),
    }
