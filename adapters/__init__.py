"""adapters layer of tianshu-mcp (see docs/architecture.md §2): who does the work.

Plain Python (no Prefect, no acceptance import): the profile registry
(:mod:`.profiles`, ``agent-profiles.json``) and the generic CLI agent runner (:mod:`.cli`).
"""

from .cli import AgentRunContext, AgentRunResult, Invocation, build_invocation, build_prompt, run_cli_agent
from .profiles import AgentProfile, ResolvedAgent, builtin_profiles, list_agents, load_profiles, resolve_agent

__all__ = [
    "AgentProfile",
    "AgentRunContext",
    "AgentRunResult",
    "Invocation",
    "ResolvedAgent",
    "build_invocation",
    "build_prompt",
    "builtin_profiles",
    "list_agents",
    "load_profiles",
    "resolve_agent",
    "run_cli_agent",
]
