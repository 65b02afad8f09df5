"""The Agent Client Protocol driver (docs/agent-adapters.md §3).

* :mod:`.driver` — one round over JSON-RPC on the agent's stdio;
* :mod:`.client` — our side of the connection (updates, permission requests);
* :mod:`.policy` — who answers ``session/request_permission``.

Inside this package ``import acp`` still names the Agent Client Protocol SDK (absolute imports).
"""
