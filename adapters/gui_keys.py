"""The keys of a desktop profile's ``gui`` object and their JSON types (docs/agents-tasks.md §1.6).

Shared by :mod:`.profiles` (a wrong type is refused when ``agent-profiles.json`` loads:
``CONFIG_INVALID`` naming the key) and :mod:`.cdp.config` (which reads the values). Keys not
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
        value = raw.get(key)
        if key not in raw:
            continue
        if not isinstance(value, int) or isinstance(value, bool):
            out.append(f"gui.{key}: expected {'a port number' if key == 'cdpPort' else 'an integer'}, got {value!r}")
        elif key == "cdpPort" and not 1024 <= value <= 65535:
            out.append(f"gui.cdpPort: expected a port number from 1024 to 65535, got {value}")
        elif value < 1:
            out.append(f"gui.{key}: expected a positive integer, got {value}")
    for key in BOOL_KEYS:
        if key in raw and not isinstance(raw[key], bool):
            out.append(f"gui.{key}: expected true or false, got {raw[key]!r}")
    for key in STR_KEYS:
        if key in raw and raw[key] is not None and not isinstance(raw[key], str):
            out.append(f"gui.{key}: expected a string, got {raw[key]!r}")
    if "exeArgs" in raw:
        args = raw["exeArgs"]
        if not (isinstance(args, list) and all(isinstance(a, str) for a in args)):
            out.append("gui.exeArgs: expected a list of strings")
        elif not any("<port>" in a for a in args):
            out.append("gui.exeArgs: no item holds <port> (e.g. \"--remote-debugging-port=<port>\"): the app would "
                       "start without a debugging port")
    sel = raw.get("selectors")
    if sel is not None and not (isinstance(sel, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in sel.items())):
        out.append("gui.selectors: expected an object of strings (semantic name → CSS selector)")
    return out
