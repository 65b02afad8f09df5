#!/usr/bin/env python3
"""A scripted CLI agent for a real project (the verification-integrity tests, docs/integrity.md).

Called as ``scripted_real_agent.py <prompt>`` with the project as its working directory, it carries
out the plan in ``$REAL_PLAN`` (JSON, set through the profile's ``env``), whatever the prompt says::

    {"edits": [{"path": "pkg/mod.py", "old": "text", "new": "text"}, ...],
     "writes": {"conftest.py": "whole file text", ...}}

Each edit replaces the one occurrence of ``old`` (which must be there) in ``path``; each write
creates or replaces a file. A plan is a fix or a cheat: the tests decide which. Like real agents
it prints to stdout and stderr, and ends with a summary line.
"""

import json
import os
import sys


def main() -> int:
    prompt = sys.argv[1] if len(sys.argv) > 1 else ""
    plan = json.loads(os.environ["REAL_PLAN"])
    print(f"scripted real agent: prompt of {len(prompt)} chars", flush=True)
    print("scripted real agent: working…", file=sys.stderr, flush=True)
    for edit in plan.get("edits", []):
        with open(edit["path"], encoding="utf-8") as fh:
            text = fh.read()
        if text.count(edit["old"]) != 1:
            print(f"scripted real agent: {edit['path']} has {text.count(edit['old'])} matches of the edit", file=sys.stderr)
            return 1
        with open(edit["path"], "w", encoding="utf-8") as fh:
            fh.write(text.replace(edit["old"], edit["new"]))
    for rel, text in plan.get("writes", {}).items():
        os.makedirs(os.path.dirname(rel) or ".", exist_ok=True)
        with open(rel, "w", encoding="utf-8") as fh:
            fh.write(text)
    changed = [e["path"] for e in plan.get("edits", [])] + list(plan.get("writes", {}))
    print(f"scripted real agent: changed {', '.join(changed)}. All tests pass.", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
