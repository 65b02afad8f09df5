"""Built-in desktop (``gui``) agent profiles: chat apps driven over CDP (40-agents-tasks §1.7, §1.11).

Data only: :mod:`.profiles` merges these with the CLI built-ins and the user's file.
"""

from __future__ import annotations

from typing import Any

GUI_UNAVAILABLE_NOTE = "desktop driver not available in this build"
"""``note`` of the built-in GUI profiles (40-agents-tasks §1.7): listed, not runnable."""


def gui_builtin_data() -> dict[str, dict[str, Any]]:
    """Raw built-in GUI profiles, keyed by agent id, as they would appear in ``agent-profiles.json``."""
    names = {
        "zcode": "ZCode (desktop)",
        "traework": "TraeWork (TRAE SOLO CN desktop)",
        "kimicode": "Kimi Code (desktop)",
        "qoder": "Qoder (desktop)",
        "opendesign": "Open Design (desktop)",
        "minimax": "MiniMax Code (desktop)",
    }
    return {
        agent_id: {
            "displayName": name,
            "type": "cli",
            "driver": "gui",
            "adapter": f"{agent_id}-gui",
            "status": "unsupported",
            "command": None,
            "argsTemplate": [],
            "promptMode": "arg",
            "cwd": "task",
            "env": {},
            "note": GUI_UNAVAILABLE_NOTE,
        }
        for agent_id, name in names.items()
    }
