"""The environment every child we start receives (agents, checks, git): one list, one place.

A child must never see how to reach or drive our Prefect API, nor where a git repository other
than its own lives. :func:`scrub` removes, from a copy of an environment:

* ``PREFECT_*`` — the API address and its credentials (``PREFECT_API_URL``,
  ``PREFECT_API_AUTH_STRING``, ``PREFECT_API_KEY``, ``PREFECT_SERVER_API_AUTH_STRING``) and every
  other Prefect setting of ours (hosting issue: "agents and checks do not receive the API
  address or credentials");
* ``TIANSHU_MCP_HOST_PID`` / ``TIANSHU_MCP_HOST_CTIME`` / ``TIANSHU_MCP_HOME`` /
  ``TIANSHU_MCP_ENGINE_SOCKET`` — our own plumbing;
* the git location variables ``GIT_DIR``, ``GIT_WORK_TREE``, ``GIT_INDEX_FILE``,
  ``GIT_COMMON_DIR``, ``GIT_OBJECT_DIRECTORY``, ``GIT_ALTERNATE_OBJECT_DIRECTORIES``,
  ``GIT_NAMESPACE``, ``GIT_CEILING_DIRECTORIES`` — inherited from a server started inside a git
  hook or wrapper, they would point the child's git at another repository.

The process tags (``TIANSHU_MCP_PROC_TAG``, ``TIANSHU_MCP_PROJECT_TAG``) are kept: they are how
an orphaned descendant is still recognised as ours.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

GIT_LOCATION_VARS = (
    "GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR", "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_NAMESPACE", "GIT_CEILING_DIRECTORIES",
)
OWN_VARS = ("TIANSHU_MCP_HOST_PID", "TIANSHU_MCP_HOST_CTIME", "TIANSHU_MCP_HOME", "TIANSHU_MCP_ENGINE_SOCKET")
SCRUBBED_PREFIXES = ("PREFECT_",)


def scrub(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """A copy of ``env`` (default ``os.environ``) without the variables listed in the module doc.

    Returns:
        A new dict; ``env`` is not modified.
    """
    source = os.environ if env is None else env
    drop = set(GIT_LOCATION_VARS) | set(OWN_VARS)
    return {k: v for k, v in source.items() if k not in drop and not k.startswith(SCRUBBED_PREFIXES)}
