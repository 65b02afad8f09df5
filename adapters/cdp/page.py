"""The desktop app's window as the driver sees it: one Playwright page and the profile's
selectors (docs/agents-tasks.md §1.11.3–§1.11.7).

:class:`AppPage` reads the window in one ``evaluate`` per poll (:meth:`AppPage.snapshot`) and
performs the setup steps: bind the project, pick the model, type and read back the message,
click. Every step checks its effect by reading the window back; a step that cannot be done
raises :class:`StepError` with the spec's end reason (``project_ambiguous``,
``project_mismatch``, ``model_unavailable``, ``model_mismatch``, ``input_mismatch``,
``send_unknown``) and, for selector failures, up to 20 visible labels of the window.

Simplified: a project that is not in the picker is added through the profile's
``projectAdd`` → ``projectPathInput`` → ``projectAddConfirm`` selectors (an in-app path field);
the original drives the OS's native folder dialog, which needs Windows UI automation.
Permission-mode switching (``permission_unknown``) is not implemented.
"""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass
from typing import Any

from ...core.i18n import N_, _
from .config import GuiSettings

SNAPSHOT_JS = r"""
(a) => {
  const S = a.sel;
  const vis = (el) => {
    if (!el || !el.isConnected || el.getClientRects().length === 0) return false;
    const st = getComputedStyle(el);
    return st.visibility !== 'hidden' && st.display !== 'none';
  };
  const all = (sel) => { if (!sel) return []; try { return [...document.querySelectorAll(sel)].filter(vis); } catch (e) { return []; } };
  const first = (sel) => all(sel)[0] || null;
  const text = (el) => el ? (el.innerText || el.textContent || '').trim() : '';
  const inputEl = first(S.input);
  const replies = all(S.reply);
  const card = first(S.confirmCard);
  const conv = text(first(S.conversation));
  let input = null;
  if (inputEl) input = ('value' in inputEl && typeof inputEl.value === 'string') ? inputEl.value : (inputEl.innerText || '');
  return {
    login: !!first(S.login),
    confirm: card ? text(card).slice(0, 2000) : null,
    stop: !!first(S.stop),
    running: !!first(S.running),
    replyCount: replies.length,
    reply: replies.slice(a.since).map(text).join('\n\n'),
    hasMarker: !!a.marker && conv.includes(a.marker),
    hasTaskMarker: !!a.taskMarker && conv.includes(a.taskMarker),
    input,
    inputReady: !!inputEl && !inputEl.disabled,
  };
}
"""

LABELS_JS = r"""
(a) => {
  const out = [];
  for (const el of document.querySelectorAll('button, [role], a, input, textarea, [aria-label]')) {
    if (el.getClientRects().length === 0) continue;
    const label = (el.getAttribute('aria-label') || el.getAttribute('title') || el.innerText || el.value || '').trim().slice(0, 40);
    if (label && !out.includes(label)) out.push(label);
    if (out.length >= 20) break;
  }
  return out;
}
"""

ITEMS_JS = r"""
(a) => {
  let els = [];
  try { els = [...document.querySelectorAll(a.sel)]; } catch (e) { return []; }
  return els.filter((el) => el.getClientRects().length > 0).map((el) => ({
    value: (a.attr && el.getAttribute(a.attr)) || el.getAttribute('title') || (el.innerText || '').trim(),
    label: (el.innerText || '').trim(),
  }));
}
"""


class StepError(Exception):
    """A setup step failed; ``reason`` is the spec's end reason (docs/agents-tasks.md §1.3).

    ``message`` is a constant English msgid (``N_``) whose ``{named}`` placeholders ``values`` fill:
    ``str(exc)`` is English (the round's log), ``exc.shown`` the locale's words (the task's message)."""

    def __init__(self, reason: str, message: str, **values: Any) -> None:
        super().__init__(message.format(**values))
        self.reason = reason
        self.shown = _(message).format(**values)


@dataclass(frozen=True)
class Snapshot:
    """One read of the window (see ``SNAPSHOT_JS``): ``login``, ``confirm`` (card text or None),
    ``stop``, ``running``, ``reply_count`` (visible replies), ``reply`` (replies after the
    ``since`` index, joined), ``has_marker`` / ``has_task_marker`` (the conversation holds this
    round's / this task's marker), ``input`` (the composer's text, None when not found),
    ``input_ready``."""

    login: bool
    confirm: str | None
    stop: bool
    running: bool
    reply_count: int
    reply: str
    has_marker: bool
    has_task_marker: bool
    input: str | None
    input_ready: bool


def norm_path(path: str) -> str:
    """A folder path normalised for comparison (absolute, no trailing separator)."""
    return os.path.normpath(os.path.abspath(os.path.expanduser(path.strip()))) if path.strip() else ""


class AppPage:
    """The app's window (a Playwright ``Page``) driven by ``settings.selectors``.

    Every action is bounded by ``settings.cdp_send_timeout_ms``; a closed window or a lost
    connection raises Playwright's ``Error`` (the caller maps it to ``cdp_disconnected``).
    """

    def __init__(self, page: Any, settings: GuiSettings) -> None:
        self.page = page
        self.settings = settings
        self.sel = settings.selectors
        self.timeout_ms = settings.cdp_send_timeout_ms

    async def snapshot(self, since: int = 0, marker: str = "", task_marker: str = "") -> Snapshot:
        """Read the window once (one ``evaluate``)."""
        d = await asyncio.wait_for(
            self.page.evaluate(SNAPSHOT_JS, {"sel": self.sel, "since": since, "marker": marker, "taskMarker": task_marker}),
            self.timeout_ms / 1000)
        return Snapshot(bool(d["login"]), d["confirm"], bool(d["stop"]), bool(d["running"]), int(d["replyCount"]),
                        str(d["reply"] or ""), bool(d["hasMarker"]), bool(d["hasTaskMarker"]), d["input"],
                        bool(d["inputReady"]))

    async def visible_labels(self) -> list[str]:
        """Up to 20 visible labels of the window (selector-failure diagnostics); [] on error."""
        try:
            return list(await asyncio.wait_for(self.page.evaluate(LABELS_JS, {}), self.timeout_ms / 1000))
        except Exception:  # noqa: BLE001 - diagnostics only
            return []

    def _visible(self, key: str) -> Any:
        return self.page.locator(self.sel[key]).locator("visible=true")

    async def has(self, key: str) -> bool:
        """A visible element matches selector ``key`` (False for a disabled key)."""
        if not self.sel.get(key):
            return False
        return await self._visible(key).count() > 0

    async def click(self, key: str) -> bool:
        """Click the first visible element of ``key``; False when there is none — also when it
        went away between the look and the click (Playwright would wait the whole timeout for it).

        Raises: Playwright's ``Error`` when the element stays but cannot be clicked.
        """
        if not await self.has(key):
            return False
        try:
            await self._visible(key).first.click(timeout=self.timeout_ms)
        except Exception:  # noqa: BLE001 - a vanished element is "none"; anything else is re-raised
            if await self.has(key):
                raise
            return False
        return True

    async def answer_card(self, allow: bool) -> bool:
        """Click the confirmation card's Allow (``allow``) or Deny button, then wait (≤ the action
        timeout) until the card is gone, so the next poll never clicks an answered card again.

        Returns False when no card with that button is shown, True once it was answered (or went
        away on its own before the click landed: the app resolved it meanwhile).
        """
        if not await self.click("confirmAllow" if allow else "confirmDeny") and not await self._card_gone():
            return False
        await self._wait(self._card_gone, self.timeout_ms)
        return True

    async def _card_gone(self) -> bool:
        return not await self.has("confirmCard")

    async def type_text(self, text: str) -> str:
        """Replace the composer's content with ``text`` and return what it holds afterwards."""
        if not await self.has("input"):
            raise StepError("input_mismatch", N_("no composer found (selector input={selector}); visible: {visible}"),
                            selector=repr(self.sel.get("input")), visible=await self.visible_labels())
        box = self._visible("input").first
        await box.fill(text, timeout=self.timeout_ms)
        snap = await self.snapshot()
        return snap.input or ""

    async def _wait(self, check: Any, budget_ms: int) -> Any:
        """Poll ``check()`` every 200 ms until it returns a truthy value or ``budget_ms`` passes."""
        deadline = time.monotonic() + budget_ms / 1000
        while True:
            value = await check()
            if value or time.monotonic() >= deadline:
                return value
            await asyncio.sleep(0.2)

    async def _items(self, key: str, attr: str | None) -> list[dict[str, str]]:
        if not self.sel.get(key):
            return []
        return list(await asyncio.wait_for(self.page.evaluate(ITEMS_JS, {"sel": self.sel[key], "attr": attr}),
                                           self.timeout_ms / 1000))

    async def current_project(self) -> str:
        """The folder the window is bound to ("" when none or unreadable)."""
        items = await self._items("projectCurrent", self.settings.project_path_attribute)
        return items[0]["value"] if items else ""

    async def bind_project(self, path: str) -> str:
        """Bind the window to folder ``path`` (docs/agents-tasks.md §1.11.5); returns how it was done.

        Already bound → nothing. Else open ``projectTrigger`` and click the one item whose
        folder path (``projectPathAttribute``) equals ``path`` — or, failing paths, whose label
        is the folder's name; none → add it (``projectAdd`` + ``projectPathInput`` +
        ``projectAddConfirm``). The binding is read back (≤ 40 × 200 ms, 2 attempts).

        Raises:
            StepError: ``project_ambiguous`` (several items match), ``project_mismatch`` (the
                window is bound elsewhere after the attempts, or the picker cannot be driven).
        """
        want = norm_path(path)
        if norm_path(await self.current_project()) == want:
            return "already bound"
        how = ""
        for _attempt in range(2):
            if not await self.click("projectTrigger"):
                raise StepError("project_mismatch", N_("no project picker (selector projectTrigger={selector}); "
                                                       "visible: {visible}"),
                                selector=repr(self.sel.get("projectTrigger")), visible=await self.visible_labels())
            items = await self._wait(lambda: self._items("projectItem", self.settings.project_path_attribute), 1000) or []
            exact = [i for i, it in enumerate(items) if norm_path(it["value"]) == want]
            if not exact:
                name = os.path.basename(want)
                exact = [i for i, it in enumerate(items) if it["label"].strip() == name]
            if len(exact) > 1:
                raise StepError("project_ambiguous", N_("{n} picker items match {path}"), n=len(exact), path=path)
            if exact:
                await self._visible("projectItem").nth(exact[0]).click(timeout=self.timeout_ms)
                how = "picked from the project picker"
            else:
                if not await self.click("projectAdd") or not await self.has("projectPathInput"):
                    raise StepError("project_mismatch", N_("{path} is not in the project picker and it cannot be added "
                                                           "(selectors projectAdd/projectPathInput); visible: {visible}"),
                                    path=path, visible=await self.visible_labels())
                await self._visible("projectPathInput").first.fill(path, timeout=self.timeout_ms)
                if not await self.click("projectAddConfirm"):
                    raise StepError("project_mismatch", N_("no projectAddConfirm button to add the folder"))
                how = "added to the project picker"

            async def bound() -> bool:
                return norm_path(await self.current_project()) == want

            if await self._wait(bound, 8000):
                return how
        raise StepError("project_mismatch", N_("the window stays bound to {current}, not {path}"),
                        current=repr(await self.current_project()), path=path)

    async def current_model(self) -> str:
        """The model the window shows ("" when unreadable)."""
        items = await self._items("modelCurrent", None)
        return items[0]["label"] if items else ""

    async def pick_model(self, model: str) -> str:
        """Select ``model`` in the model menu (docs/agents-tasks.md §1.11.6); returns how.

        Already selected → nothing. Else open ``modelTrigger`` and click the one
        ``modelOption`` whose text is exactly ``model`` (15 × 200 ms), then read back.

        Raises:
            StepError: ``model_unavailable`` (no single exact option; the message lists the
                options seen), ``model_mismatch`` (another model shows after the click).
        """
        if (await self.current_model()).strip() == model:
            return "already selected"
        if not await self.click("modelTrigger"):
            raise StepError("model_unavailable", N_("no model menu (selector modelTrigger={selector})"),
                            selector=repr(self.sel.get("modelTrigger")))
        seen: list[str] = []
        for _poll in range(15):
            items = await self._items("modelOption", None)
            seen = [it["label"] for it in items]
            matches = [i for i, label in enumerate(seen) if label.strip() == model]
            if len(matches) == 1:
                await self._visible("modelOption").nth(matches[0]).click(timeout=self.timeout_ms)
                break
            await asyncio.sleep(0.2)
        else:
            raise StepError("model_unavailable", N_("model {model} is not one option of the model menu; options: {options}"),
                            model=repr(model), options=seen[:20])

        async def shows() -> bool:
            return (await self.current_model()).strip() == model

        if not await self._wait(shows, 3000):
            raise StepError("model_mismatch", N_("the window shows model {current} after picking {model}"),
                            current=repr(await self.current_model()), model=repr(model))
        return "picked from the model menu"
