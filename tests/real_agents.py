"""The real agent CLIs of the ``real_agents`` tier (docs/real-agents.md): where they are installed and how
each is pointed at the scripted model endpoint — the same facts a user follows to point them at a
company proxy or a local model (README, "Agents").

:func:`install` runs ``scripts/install-real-agents.sh`` (pinned versions; Node 22 from the npm
registry) and returns the PATH entries. :func:`agent_home` writes each CLI's configuration into a
home directory of its own and returns the environment variables that go with it. Every CLI reads
its own variables, so one environment serves them all and the built-in profiles run unchanged.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
INSTALLER = ROOT / "scripts" / "install-real-agents.sh"
MODEL = "scripted-model"
KEY = "sk-scripted-test-key"


def install() -> list[str]:
    """Install (or find installed) the pinned CLIs; the directories to put first on PATH.

    Raises:
        subprocess.CalledProcessError: the installer failed (its output says why).
    """
    out = subprocess.run([str(INSTALLER)], check=True, capture_output=True, text=True, timeout=1800)
    return out.stdout.strip().splitlines()[-1].split(os.pathsep)


def agent_home(home: Path, url: str) -> dict[str, str]:
    """Write every CLI's configuration for the endpoint at ``url`` into ``home``; the variables.

    * Claude Code / claude-agent-acp: ``ANTHROPIC_BASE_URL`` + ``ANTHROPIC_API_KEY`` (and the model
      in ``ANTHROPIC_MODEL``); nothing on disk.
    * Codex / codex-acp: a custom provider in ``~/.codex/config.toml`` (``wire_api = "responses"``)
      whose key is read from ``SCRIPTED_API_KEY``; the built-in ``openai`` provider with
      ``openai_base_url`` works too but first tries a WebSocket for about 7 s.
    * Gemini CLI (headless and ``--acp``): ``GOOGLE_GEMINI_BASE_URL`` + ``GEMINI_API_KEY`` +
      ``GEMINI_MODEL``, and ``~/.gemini/settings.json`` selecting the API-key auth (with a base URL
      set and no selection, headless gemini exits 41 "Invalid auth method selected.").
    * Qwen Code: ``OPENAI_BASE_URL`` + ``OPENAI_API_KEY`` + ``OPENAI_MODEL`` (it picks the
      OpenAI-compatible auth by itself).
    * opencode (``run`` and ``acp``): a provider in ``~/.config/opencode/opencode.json`` using the
      bundled ``@ai-sdk/openai-compatible`` package, with its base URL and key; model
      ``local/scripted-model``.
    * aider: ``OPENAI_API_BASE`` + ``OPENAI_API_KEY`` and ``AIDER_MODEL=openai/<model>``.
    """
    home.mkdir(parents=True, exist_ok=True)
    codex = home / ".codex"
    codex.mkdir(exist_ok=True)
    (codex / "config.toml").write_text(
        f'model = "{MODEL}"\nmodel_provider = "scripted"\n\n[model_providers.scripted]\nname = "Scripted"\n'
        f'base_url = "{url}/v1"\nwire_api = "responses"\nenv_key = "SCRIPTED_API_KEY"\n')
    _json(home / ".gemini" / "settings.json", {"security": {"auth": {"selectedType": "gemini-api-key"}}})
    _json(home / ".config" / "opencode" / "opencode.json", {
        "$schema": "https://opencode.ai/config.json",
        "provider": {"local": {"npm": "@ai-sdk/openai-compatible", "name": "Local",
                               "options": {"baseURL": f"{url}/v1", "apiKey": KEY},
                               "models": {MODEL: {"name": MODEL}}}},
        "model": f"local/{MODEL}", "small_model": f"local/{MODEL}", "autoupdate": False, "share": "disabled"})
    return {
        "HOME": str(home),
        "GOOGLE_GEMINI_BASE_URL": url,
        "GEMINI_API_KEY": KEY,
        "GEMINI_MODEL": MODEL,
        "OPENAI_BASE_URL": f"{url}/v1",
        "OPENAI_API_KEY": KEY,
        "OPENAI_MODEL": MODEL,
        "OPENCODE_DISABLE_AUTOUPDATE": "1",
        "OPENAI_API_BASE": f"{url}/v1",
        "AIDER_MODEL": f"openai/{MODEL}",
        "ANTHROPIC_BASE_URL": url,
        "ANTHROPIC_API_KEY": KEY,
        "ANTHROPIC_MODEL": MODEL,
        "DISABLE_TELEMETRY": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "SCRIPTED_API_KEY": KEY,
    }


def _json(path: Path, data: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2))
