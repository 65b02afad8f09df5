"""The keys of a desktop profile's ``gui`` object and their JSON types (40-agents-tasks §1.6).

Shared by :mod:`.profiles` (a wrong type is refused when ``agent-profiles.json`` loads:
``CONFIG_INVALID`` naming the key) and :mod:`.cdp_config` (which reads the values). Keys not
listed here (``activation``, ``appxPackageName``, install facts) are kept and not checked.
"""

from __future__ import annotations

from typing import Any

INT_KEYS = {"cdpPort": "cdp_port", "cdpPortRange": "cdp_port_range", "launchTimeoutMs": "launch_timeout_ms",
         "pollIntervalMs": "poll_interval_ms", "stableRounds": "stable_rounds", "idleTimeoutMs": "idle_timeout_ms",
         "stallTimeoutMs": "stall_timeout_ms", "cancelWaitMs": "cancel_wait_ms",
         "cdpSendTimeoutMs": "cdp_send_timeout_ms", "progressIntervalMs": "progress_interval_ms"}
BOOL_KEYS = {"cdpPortAuto": "cdp_port_auto", "freshSession": "fresh_session", "modelSwitch": "model_switch",
          "modelRequired": "model_required", "stopCapable": "stop_capable"}
STR_KEYS = {"userDataDir": "user_data_dir", "pageUrlPattern": "page_url_pattern", "pageTitlePattern": "page_title_pattern",
         "model": "model", "projectPathAttribute": "project_path_attribute"}


def gui_problems(raw: Any) -> list[str]:
    """What is wrong with a ``gui`` object: ``["gui.cdpPort: expected an integer", …]`` (empty
    when nothing is)."""
    if not isinstance(raw, dict):
        return ["gui: expected an object"]
    out = []
    for key in INT_KEYS:
        if key in raw and (not isinstance(raw[key], int) or isinstance(raw[key], bool) or raw[key] < 0):
            out.append(f"gui.{key}: expected a non-negative integer, got {raw[key]!r}")
    for key in BOOL_KEYS:
        if key in raw and not isinstance(raw[key], bool):
            out.append(f"gui.{key}: expected true or false, got {raw[key]!r}")
    for key in STR_KEYS:
        if key in raw and raw[key] is not None and not isinstance(raw[key], str):
            out.append(f"gui.{key}: expected a string, got {raw[key]!r}")
    if "exeArgs" in raw and not (isinstance(raw["exeArgs"], list) and all(isinstance(a, str) for a in raw["exeArgs"])):
        out.append("gui.exeArgs: expected a list of strings")
    sel = raw.get("selectors")
    if sel is not None and not (isinstance(sel, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in sel.items())):
        out.append("gui.selectors: expected an object of strings (semantic name → CSS selector)")
    return out
