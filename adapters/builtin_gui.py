"""Built-in desktop (``gui``) agent profiles: chat apps driven over CDP by :mod:`.cdp`
(docs/agents-tasks.md §1.7, §1.11).

Data only: :mod:`.profiles` merges these with the CLI and ACP built-ins and the user's file.
The facts (debugging ports and ranges, launch budgets, activation, install locations, the
user-data-dir rule, selectors where they were measured) come from docs/agents-tasks.md §1.7 and §1.11 and from
the( )profiles and selector tables of the original TypeScript tianshu-mcp; each profile's ``note`` names its
platform.

Every one of these apps is a Windows/macOS Electron app, and this build runs on Linux: they are
``status: research`` (listed, never dispatched; docs/agents-tasks.md §1.8). To drive one where it
does run, copy its entry into ``agent-profiles.json`` under the same id, set ``"status":
"ready"`` and ``command`` to the app's executable, and adjust ``gui`` (its ``selectors`` follow
the semantic keys of :data:`tianshu_mcp.adapters.cdp.config.DEFAULT_SELECTORS`).
"""

from __future__ import annotations

from typing import Any

GUI_UNAVAILABLE_NOTE = "a Windows/macOS desktop app that cannot run on this OS (Linux)"
"""The start of every built-in GUI profile's ``note``: why it is ``research`` here."""

_COMMON_TIMINGS = {"pollIntervalMs": 3000, "idleTimeoutMs": 600_000, "stallTimeoutMs": 300_000,
                   "cancelWaitMs": 15_000, "cdpSendTimeoutMs": 15_000, "progressIntervalMs": 30_000}


def _discovery(name: str, exe: str, win_dirs: list[str], drives: list[str] | None = None,
               relative: list[str] | None = None) -> dict[str, Any]:
    """``executableDiscovery`` of an ordinary (non-MSIX) Electron install of ``name``."""
    return {
        "dirs": [*win_dirs, f"/Applications/{name}.app/Contents/MacOS", f"{{HOME}}/Applications/{name}.app/Contents/MacOS"],
        "fileNames": [f"{exe}.exe", exe],
        "preferredDrives": drives or [],
        "relativePaths": relative or [],
    }


def _profile(display: str, adapter: str, why: str, gui: dict[str, Any], discovery: dict[str, Any],
             auth: str) -> dict[str, Any]:
    return {
        "displayName": display,
        "type": "cli",
        "driver": "gui",
        "adapter": adapter,
        "status": "research",
        "command": None,
        "argsTemplate": [],
        "promptMode": "arg",
        "cwd": "task",
        "env": {},
        "authNote": auth,
        "executableDiscovery": discovery,
        "gui": {**_COMMON_TIMINGS, "exeArgs": ["--remote-debugging-port=<port>"], "freshSession": True,
                "modelSwitch": True, **gui},
        "note": f"{GUI_UNAVAILABLE_NOTE}: {why}",
    }


def gui_builtin_data() -> dict[str, dict[str, Any]]:
    """Raw built-in GUI profiles, keyed by agent id, as they would appear in ``agent-profiles.json``.

    ``codex-desktop`` is the Codex desktop app (the original's ``codex`` GUI profile; the id
    ``codex`` is the Codex CLI here). ``minimax`` comes from the original's fork.
    """
    return {
        "codex-desktop": _profile(
            "Codex (ChatGPT desktop)", "codex-gui",
            "Codex desktop is an MSIX Store package on Windows (ChatGPT.exe cannot be started directly; the "
            "original activates it through IApplicationActivationManager COM with a dedicated user-data-dir and "
            "--remote-debugging-port injected) and a .app bundle on macOS (spawned directly)",
            {"cdpPort": 9333, "cdpPortAuto": True, "cdpPortRange": 30, "launchTimeoutMs": 150_000,
             "stableRounds": 4, "modeSwitch": False, "modelRequired": True, "activation": "msix-com",
             "appxPackageName": "OpenAI.Codex", "permissionMode": "完全访问", "defaultAutoFixRounds": 5,
             "fixPlanDir": ".zcode/plans", "originalUserDataDir": "{LOCALAPPDATA}/tianshu-mcp/codex-gui/profile"},
            {"dirs": ["/Applications/ChatGPT.app/Contents/MacOS"], "fileNames": ["ChatGPT.exe", "ChatGPT"],
             "preferredDrives": ["C:"], "appxPackageName": "OpenAI.Codex", "installRelativeExe": ["app/ChatGPT.exe"],
             "scanRoots": ["{SYSTEMDRIVE}/Program Files/WindowsApps"],
             "scanPattern": "OpenAI.Codex_*_x64__*/app/ChatGPT.exe"},
            "reuses the ~/.codex login; the managed instance has its own user-data-dir"),
        "zcode": _profile(
            "ZCode (desktop)", "zcode-gui",
            "ZCode is an Electron app for Windows and macOS (research in the original too until verified on macOS)",
            {"cdpPort": 9333, "cdpPortAuto": True, "cdpPortRange": 30, "launchTimeoutMs": 60_000, "stableRounds": 4,
             "modeSwitch": False, "modelRequired": True, "activation": "spawn", "permissionMode": "完全访问",
             "defaultAutoFixRounds": 2, "stopCapable": False},
            _discovery("ZCode", "ZCode", ["{PROGRAMFILES}/ZCode", "{PROGRAMFILES(X86)}/ZCode",
                                          "{LOCALAPPDATA}/Programs/ZCode", "{LOCALAPPDATA}/ZCode"],
                       ["D:"], ["Z-Code/ZCode/ZCode.exe", "ZCode/ZCode.exe"]),
            "reuses the machine's ZCode login"),
        "traework": _profile(
            "TraeWork (TRAE SOLO CN desktop)", "traework-gui",
            "TRAE SOLO CN is a Windows/macOS Electron app (selectors measured on v1.107.1, Windows); its project "
            "picker adds folders through the native folder dialog, which this driver cannot operate, and picker "
            "items show the folder path as a subtitle, not an attribute",
            {"cdpPort": 9222, "cdpPortAuto": True, "cdpPortRange": 20, "launchTimeoutMs": 60_000, "stableRounds": 12,
             "modeSwitch": True, "modelRequired": False, "activation": "spawn", "stopCapable": False,
             "selectors": {
                 "input": ".chat-input-v2-input-box-editable, .solo-lite-chat-input-field",
                 "newSession": ".task-list-new-task-item",
                 "conversation": ".message-list-cache-container",
                 "running": ".core-toolcall-base-card, .core-run-command-card",
                 "projectTrigger": '[class*="projectButtonPlaceholder"]',
                 "projectItem": '[class*="cascadeMenuItemWithSubtitle"]',
                 "projectAdd": '[class*="cascadeFooterButton"]',
                 "modelTrigger": ".core-model-select-trigger",
                 "modelCurrent": ".core-model-select-trigger-value",
                 "modelOption": ".core-model-select-model-item",
             }},
            _discovery("TraeWork", "TraeWork", ["D:/TRAE Work CN", "{PROGRAMFILES}/TRAE WORK CN",
                                                "{LOCALAPPDATA}/Programs/TRAE WORK CN", "{APPDATA}/TRAE SOLO CN"])
            | {"fileNames": ["TRAE SOLO CN.exe", "TraeWork", "TraeWork CN", "Trae CN"]},
            "reuses the TraeWork login; the window must stay visible (sending relies on simulated input)"),
        "kimicode": _profile(
            "Kimi Code (desktop)", "kimicode-gui",
            "Kimi Code (measured 1.0.2) is an ordinary Windows/macOS Electron install driven with "
            "--remote-debugging-port; its model and mode menus render in a separate overlay window",
            {"cdpPort": 9666, "cdpPortAuto": True, "cdpPortRange": 20, "launchTimeoutMs": 90_000, "stableRounds": 4,
             "modeSwitch": False, "modelRequired": True, "activation": "spawn", "permissionMode": "完全自动",
             "defaultAutoFixRounds": 2},
            _discovery("Kimi Code", "Kimi Code", ["{PROGRAMFILES}/Kimi Code", "{PROGRAMFILES(X86)}/Kimi Code",
                                                  "{LOCALAPPDATA}/Programs/Kimi Code", "{LOCALAPPDATA}/Kimi Code"],
                       ["D:"], ["Kimi-Code/Kimi Code/Kimi Code.exe", "Kimi Code/Kimi Code.exe"]),
            "reuses the Kimi Code login; an instance already running without CDP must be closed by the user"),
        "qoder": _profile(
            "Qoder CN (desktop)", "qoder-gui",
            "Qoder CN was verified on Windows only (macOS research, no Linux build)",
            {"cdpPort": 9777, "cdpPortAuto": True, "cdpPortRange": 20, "launchTimeoutMs": 90_000,
             "cdpSendTimeoutMs": 30_000, "stableRounds": 2, "modeSwitch": False, "modelRequired": False,
             "activation": "spawn", "defaultAutoFixRounds": 3},
            _discovery("Qoder CN", "Qoder CN", ["{LOCALAPPDATA}/Programs/Qoder CN", "{PROGRAMFILES}/Qoder CN",
                                                "{PROGRAMFILES(X86)}/Qoder CN"],
                       ["D:"], ["Qoder CN/Qoder CN.exe", "Program Files/Qoder CN/Qoder CN.exe"]),
            "reuses the Qoder CN login; an instance that cannot be connected is left to the user"),
        "opendesign": _profile(
            "Open Design (desktop)", "opendesign-gui",
            "Open Design (measured 0.24.1) is an ordinary Windows/macOS Electron install; its main process forces "
            "its data directory to <APPDATA>/Open Design/namespaces/<namespace> and ignores --user-data-dir, so "
            "the user-data-dir ownership proof cannot apply to it",
            {"cdpPort": 9889, "cdpPortAuto": True, "cdpPortRange": 10, "launchTimeoutMs": 60_000, "stableRounds": 4,
             "modeSwitch": False, "activation": "spawn"},
            _discovery("Open Design", "Open Design", ["{PROGRAMFILES}/Open Design", "{LOCALAPPDATA}/Programs/Open Design"],
                       ["D:"], ["Open Design/Open Design.exe"]),
            "reuses the Open Design login"),
        "minimax": _profile(
            "MiniMax Code (desktop)", "minimax-gui",
            "MiniMax Code (measured 3.1.0, Electron 42) is an ordinary Windows/macOS install; its main window is "
            "the page titled 'MiniMax Code' at app://./archon, its model menu another page; the stored sources "
            "record no debugging port, so the generic default stands",
            {"cdpPort": 9222, "cdpPortAuto": True, "cdpPortRange": 20, "launchTimeoutMs": 60_000, "stableRounds": 4,
             "modeSwitch": False, "activation": "spawn", "pageTitlePattern": "^MiniMax Code$",
             "pageUrlPattern": "^app://"},
            _discovery("MiniMax Code", "MiniMax Code", ["{PROGRAMFILES}/MiniMax Code",
                                                        "{LOCALAPPDATA}/Programs/MiniMax Code"],
                       ["D:"], ["MiniMax-Code/MiniMax Code/MiniMax Code.exe"]),
            "reuses the MiniMax Code login"),
    }
