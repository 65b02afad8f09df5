"""The ``gui`` object of a desktop agent's profile: timings, launch facts and selectors
(docs/agents-tasks.md §1.6 GuiProfile, §1.11).

Everything vendor-specific about a desktop chat app is data in its profile's ``gui`` object;
:func:`gui_settings` reads it with the spec's defaults. Selectors are CSS selectors keyed by a
semantic name (:data:`DEFAULT_SELECTORS`); a profile's ``gui.selectors`` overrides single keys.
The defaults describe a generic, accessibility-labelled chat window (the fake desktop app of the
tests follows them); a vendor's profile names its own.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..gui_keys import BOOL_KEYS as _BOOLS, INT_KEYS as _INTS, STR_KEYS as _STRS
from ..profiles import AgentProfile, expand_discovery_dir

DEFAULT_SELECTORS: dict[str, str] = {
    "input": 'textarea, [contenteditable="true"]',
    "send": 'button[aria-label="Send"]',
    "stop": 'button[aria-label="Stop"]',
    "running": '[aria-busy="true"]',
    "reply": '[data-message-author-role="assistant"]',
    "conversation": '[role="log"]',
    "login": '[data-screen="login"]',
    "confirmCard": '[role="alertdialog"]',
    "confirmAllow": '[role="alertdialog"] button:has-text("Allow")',
    "confirmDeny": '[role="alertdialog"] button:has-text("Deny")',
    "newSession": 'button[aria-label="New chat"]',
    "projectTrigger": 'button[aria-label="Project"]',
    "projectCurrent": 'button[aria-label="Project"]',
    "projectItem": '[role="menuitem"][data-path]',
    "projectAdd": 'button[aria-label="Open folder"]',
    "projectPathInput": 'input[aria-label="Folder path"]',
    "projectAddConfirm": 'button[aria-label="Add folder"]',
    "modelTrigger": 'button[aria-label="Model"]',
    "modelCurrent": 'button[aria-label="Model"]',
    "modelOption": '[role="option"]',
}
"""Semantic selector keys and their defaults. ``input``: the composer (textarea or
contenteditable); ``send``/``stop``: the buttons; ``running``: any in-progress signal (spinner,
``aria-busy``, active tool card); ``reply``: one assistant message; ``conversation``: the message
list (searched for our marker); ``login``: the login screen; ``confirmCard``: a card asking the
user to allow something, ``confirmAllow``/``confirmDeny`` its buttons (Playwright selectors:
``:has-text()`` works); ``newSession``: the new-chat button; ``project*``: the project picker
(``projectItem`` elements carry the folder path in ``gui.projectPathAttribute``;
``projectAdd``/``projectPathInput``/``projectAddConfirm`` add a folder by its path, the stand-in
for a native folder dialog); ``model*``: the model menu. An empty string disables a key."""


@dataclass(frozen=True)
class GuiSettings:
    """A desktop agent's ``gui`` settings (docs/agents-tasks.md §1.6; times in ms).

    Attributes:
        cdp_port: first debugging port tried (``cdpPort``, 9222).
        cdp_port_auto: take the first free port of ``[cdp_port, cdp_port + cdp_port_range)``
            (``cdpPortAuto``, True); False: exactly ``cdp_port``.
        cdp_port_range: how many ports ``cdpPortAuto`` may try (``cdpPortRange``, 20, ≤ 200).
        exe_args: argv after the app's executable, ``<port>`` substituted (``exeArgs``,
            ``["--remote-debugging-port=<port>"]``); ``--user-data-dir=<dir>`` is appended.
        user_data_dir: the app's dedicated profile directory (``userDataDir``; placeholders as in
            ``executableDiscovery.dirs``), None: ``<data home>/gui/<agentId>/user-data``.
        page_url_pattern / page_title_pattern: regular expressions a ``/json/list`` page target's
            url / title must match to be the product's window (``pageUrlPattern`` /
            ``pageTitlePattern``; None matches any ``page`` target that is not ``devtools://`` or
            ``chrome://``).
        launch_timeout_ms: launch + connect budget (``launchTimeoutMs``, 60000).
        poll_interval_ms: liveness poll period (``pollIntervalMs``, 3000).
        stable_rounds: polls with an unchanged reply that make a reply final (``stableRounds``, 12).
        idle_timeout_ms: stable-but-never-running (or empty) for this long → idle_timeout
            (``idleTimeoutMs``, 600000).
        stall_timeout_ms: stop button visible and reply unchanged for this long → the app waits
            for the user (``stallTimeoutMs``, 300000).
        cancel_wait_ms: after clicking stop, how long to wait for idle (``cancelWaitMs``, 15000).
        cdp_send_timeout_ms: per CDP command / page action (``cdpSendTimeoutMs``, 15000).
        progress_interval_ms: progress-note period (``progressIntervalMs``, 30000).
        fresh_session: click ``newSession`` before the first message of a task (``freshSession``, True).
        model_switch: pick ``model`` in the model menu (``modelSwitch``, True).
        model: the model to select, or None (``model``).
        model_required: a model must be selected; without one the round fails (``modelRequired``, False).
        project_path_attribute: attribute holding a picker item's folder path (``projectPathAttribute``, ``data-path``).
        selectors: :data:`DEFAULT_SELECTORS` overlaid with ``gui.selectors``.
        stop_capable: cancel clicks stop and reports ``guiStop`` (``stopCapable``, True;
            docs/agents-tasks.md §1.11.11: False for zcode/traework).
    """

    cdp_port: int = 9222
    cdp_port_auto: bool = True
    cdp_port_range: int = 20
    exe_args: tuple[str, ...] = ("--remote-debugging-port=<port>",)
    user_data_dir: str | None = None
    page_url_pattern: str | None = None
    page_title_pattern: str | None = None
    launch_timeout_ms: int = 60_000
    poll_interval_ms: int = 3_000
    stable_rounds: int = 12
    idle_timeout_ms: int = 600_000
    stall_timeout_ms: int = 300_000
    cancel_wait_ms: int = 15_000
    cdp_send_timeout_ms: int = 15_000
    progress_interval_ms: int = 30_000
    fresh_session: bool = True
    model_switch: bool = True
    model: str | None = None
    model_required: bool = False
    project_path_attribute: str = "data-path"
    selectors: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_SELECTORS))
    stop_capable: bool = True


def gui_settings(profile: AgentProfile) -> GuiSettings:
    """Read ``profile``'s ``gui`` object (kept in ``model_extra``) over the defaults.

    The object's JSON types were checked when the profile loaded
    (:func:`tianshu_mcp.adapters.gui_keys.gui_problems`); integers are clamped to be ≥ 1
    (``cdpPortRange`` ≤ 200). Unknown keys (``activation``, ``appxPackageName``, …) are facts for
    people and other builds, not used here.
    """
    raw = (profile.model_extra or {}).get("gui")
    raw = raw if isinstance(raw, dict) else {}
    kw: dict[str, Any] = {}
    for key, attr in _INTS.items():
        value = raw.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            kw[attr] = max(1, value)
    if "cdp_port_range" in kw:
        kw["cdp_port_range"] = min(200, kw["cdp_port_range"])
    for key, attr in _BOOLS.items():
        if isinstance(raw.get(key), bool):
            kw[attr] = raw[key]
    for key, attr in _STRS.items():
        if isinstance(raw.get(key), str) and raw[key].strip():
            kw[attr] = raw[key].strip()
    args = raw.get("exeArgs")
    if isinstance(args, list) and all(isinstance(a, str) for a in args):
        kw["exe_args"] = tuple(args)
    selectors = dict(DEFAULT_SELECTORS)
    if isinstance(raw.get("selectors"), dict):
        selectors.update({k: v for k, v in raw["selectors"].items() if isinstance(k, str) and isinstance(v, str)})
    kw["selectors"] = selectors
    if "stop_capable" not in kw and profile.adapter in ("zcode-gui", "traework-gui"):
        kw["stop_capable"] = False  # docs/agents-tasks.md §1.11.11
    return GuiSettings(**kw)


def user_data_dir(settings: GuiSettings, agent_id: str, data_home: Path) -> Path:
    """The app's dedicated user-data-dir (absolute, normalised; not created here):
    ``gui.userDataDir`` with its placeholders expanded, else ``<data_home>/gui/<agent_id>/user-data``."""
    if settings.user_data_dir:
        return Path(os.path.abspath(expand_discovery_dir(settings.user_data_dir)))
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in agent_id) or "agent"
    return Path(os.path.abspath(data_home / "gui" / safe / "user-data"))
