"""The environment every child we start receives (agents, checks, git): one list, one place.

A child must never see how to reach or drive our Prefect API, nor where a git repository other
than its own lives. :func:`scrub` removes, from a copy of an environment:

* ``PREFECT_*`` — the API address and its credentials (``PREFECT_API_URL``,
  ``PREFECT_API_AUTH_STRING``, ``PREFECT_API_KEY``, ``PREFECT_SERVER_API_AUTH_STRING``) and every
  other Prefect setting of ours (docs/hosting.md §4: "agents and checks do not receive the API
  address or credentials");
* ``TIANSHU_MCP_HOST_PID`` / ``TIANSHU_MCP_HOST_CTIME`` / ``TIANSHU_MCP_HOME`` /
  ``TIANSHU_MCP_ENGINE_SOCKET`` / ``TIANSHU_PREFECT_API_URL`` — our own plumbing (the last one is
  the shared API's address on a scale-out worker);
* the git location variables ``GIT_DIR``, ``GIT_WORK_TREE``, ``GIT_INDEX_FILE``,
  ``GIT_COMMON_DIR``, ``GIT_OBJECT_DIRECTORY``, ``GIT_ALTERNATE_OBJECT_DIRECTORIES``,
  ``GIT_NAMESPACE``, ``GIT_CEILING_DIRECTORIES`` — inherited from a server started inside a git
  hook or wrapper, they would point the child's git at another repository;
* the git configuration injected through the environment: ``GIT_CONFIG_PARAMETERS`` (what
  ``git -c`` hands to the hooks and commands it runs), ``GIT_CONFIG_COUNT`` and every
  ``GIT_CONFIG_KEY_<n>`` / ``GIT_CONFIG_VALUE_<n>`` — a ``core.worktree``, ``core.hooksPath`` or
  ``safe.directory`` meant for another repository must not reach the child's git. The user's
  own configuration files (``GIT_CONFIG_GLOBAL``, ``GIT_CONFIG_SYSTEM``) are kept.

The process tags (``TIANSHU_MCP_PROC_TAG``, ``TIANSHU_MCP_PROJECT_TAG``) are kept: they are how
an orphaned descendant is still recognised as ours.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

GIT_LOCATION_VARS = (
    "GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR", "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_NAMESPACE", "GIT_CEILING_DIRECTORIES",
)
GIT_CONFIG_VARS = ("GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT")
GIT_CONFIG_PREFIXES = ("GIT_CONFIG_KEY_", "GIT_CONFIG_VALUE_")
OWN_VARS = ("TIANSHU_MCP_HOST_PID", "TIANSHU_MCP_HOST_CTIME", "TIANSHU_MCP_HOME", "TIANSHU_MCP_ENGINE_SOCKET",
            "TIANSHU_PREFECT_API_URL")
SCRUBBED_PREFIXES = ("PREFECT_",)


def scrub(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """A copy of ``env`` (default ``os.environ``) without the variables listed in the module doc.

    Returns:
        A new dict; ``env`` is not modified.
    """
    source = os.environ if env is None else env
    drop = set(GIT_LOCATION_VARS) | set(GIT_CONFIG_VARS) | set(OWN_VARS)
    prefixes = SCRUBBED_PREFIXES + GIT_CONFIG_PREFIXES
    return {k: v for k, v in source.items() if k not in drop and not k.startswith(prefixes)}


CLIENT_ENV_FILE = "client-env.json"
"""The host's environment for one task, in its task directory (mode 0600; it may hold API keys)."""


def save_client_env(task_dir: Path) -> None:
    """Record this process's environment, scrubbed (:func:`scrub`), as the environment the task's
    agents and checks run with: a stdio server calls this when it accepts a task, so the agent
    sees the host's PATH and its ``env`` block (API keys), not the background service's.

    Written atomically with mode 0600. Raises OSError when the file cannot be written.
    """
    task_dir.mkdir(parents=True, exist_ok=True)
    path = task_dir / CLIENT_ENV_FILE
    tmp = path.with_name(f".{CLIENT_ENV_FILE}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(scrub(), fh)
    os.replace(tmp, path)


def adopt_client_env(task_dir: Path) -> bool:
    """In a flow-run process: overlay ``os.environ`` with the task's recorded host environment
    (our own and Prefect's variables stay this process's). Returns False when none was recorded
    (a scheduled run: the service's environment applies) or it cannot be read."""
    try:
        recorded = json.loads((task_dir / CLIENT_ENV_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if not isinstance(recorded, dict):
        return False
    os.environ.update({str(k): str(v) for k, v in scrub(recorded).items() if isinstance(v, str)})
    return True

