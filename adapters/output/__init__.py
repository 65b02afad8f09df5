"""What an agent's output says while it works (docs/real-agents.md): progress, usage, its final message, and
a model that keeps failing.

* :mod:`.events` — the typed events every reader produces (a tool call and the files it touches,
  a retried model call, token and cost figures, the final message, the error the CLI gave up on).
* :mod:`.formats` — one reader per structured output format a CLI offers (``claude -p
  --output-format stream-json``, ``codex exec --json``, ``gemini``/``qwen --output-format
  stream-json``, ``opencode run --format json``) and the plain-text reader, which knows the retry
  lines of the text-mode CLIs.
* :mod:`.liveness` — when a retry loop on 401/403/429 ends the round early, and when a silent
  agent counts as stalled.
* :mod:`.ansi` — terminal escape codes removed before any line is quoted or matched.

Plain Python: no Prefect, no acceptance import.
"""
