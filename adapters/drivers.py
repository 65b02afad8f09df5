"""Which code drives an agent: the profile's ``driver`` picks one (docs/agents-tasks.md §1.1, §1.6).

A driver runs one round (:class:`~tianshu_mcp.adapters.round.AgentRunContext` in,
:class:`~tianshu_mcp.adapters.round.AgentRunResult` out) and may keep a session open between
the rounds of one task (an ACP agent's session, a desktop app's chat), which
:meth:`AgentDriver.end_session` closes when the task's flow run ends.

* ``spawn``: a CLI agent, one subprocess per round (:mod:`.cli`).
* ``acp``: an Agent Client Protocol agent over stdio, one process and session per task (:mod:`.acp`).
* ``gui``: a desktop chat app driven over the Chrome DevTools Protocol (:mod:`.cdp`).

Adding an agent is a profile (data); adding a kind of agent is one module with a driver here.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Protocol

from .profiles import AgentProfile, ResolvedAgent
from .round import AgentRunContext, AgentRunResult, RoundHooks


class RoundRunner(Protocol):
    """``run_round(ctx, agent, hooks) -> AgentRunResult``; never raises for a failing agent."""

    def __call__(self, ctx: AgentRunContext, agent: ResolvedAgent, hooks: RoundHooks) -> AgentRunResult: ...


@dataclass(frozen=True)
class AgentDriver:
    """One kind of agent.

    Attributes:
        name: the profile's ``driver`` value.
        run_round: runs one round.
        end_session: closes what the driver keeps open for ``task_id`` between rounds (its
            process tree included); never raises; a no-op when nothing is open.
        keeps_process: the agent's process outlives a round (the task kills it at the end of
            its flow run, not at the end of each round).
        stop_grace_ms: how long a cancel lets the driver stop the agent its own way (ACP
            ``session/cancel``, a desktop app's stop button) before the tree is killed, ms.
    """

    name: str
    run_round: RoundRunner
    end_session: Callable[[str], None]
    keeps_process: bool
    stop_grace_ms: Callable[[AgentProfile], int] = lambda profile: 0


def _cli_round(ctx: AgentRunContext, agent: ResolvedAgent, hooks: RoundHooks) -> AgentRunResult:
    from .cli import run_cli_agent

    return run_cli_agent(ctx, agent, hooks=hooks)


def _nothing_open(task_id: str) -> None:
    del task_id


def _lazy(module: str, run: str, end: str) -> tuple[RoundRunner, Callable[[str], None]]:
    """Import ``module`` on first use (Playwright and the ACP package load only when needed)."""

    def run_round(ctx: AgentRunContext, agent: ResolvedAgent, hooks: RoundHooks) -> AgentRunResult:
        return getattr(importlib.import_module(module, __package__), run)(ctx, agent, hooks)

    def end_session(task_id: str) -> None:
        # a module never imported in this process has no session open: importing it here would
        # load the ACP package and Playwright at the end of every CLI task's flow run
        mod = sys.modules.get(importlib.util.resolve_name(module, __package__))
        if mod is not None:
            getattr(mod, end)(task_id)

    return run_round, end_session


_acp_run, _acp_end = _lazy(".acp.driver", "run_acp_round", "end_acp_session")
_gui_run, _gui_end = _lazy(".cdp.driver", "run_gui_round", "end_gui_session")

def _acp_grace(profile: AgentProfile) -> int:
    from .acp.policy import AcpSettings

    return AcpSettings.model_validate((profile.model_extra or {}).get("acp") or {}).cancel_grace_ms + 2000


def _gui_grace(profile: AgentProfile) -> int:
    from .cdp.config import gui_settings

    settings = gui_settings(profile)
    return settings.cancel_wait_ms + 5000 if settings.stop_capable else 0


DRIVERS: dict[str, AgentDriver] = {
    "spawn": AgentDriver("spawn", _cli_round, _nothing_open, keeps_process=False),
    "acp": AgentDriver("acp", _acp_run, _acp_end, keeps_process=True, stop_grace_ms=_acp_grace),
    "gui": AgentDriver("gui", _gui_run, _gui_end, keeps_process=True, stop_grace_ms=_gui_grace),
}
"""Every driver, keyed by the profile's ``driver`` value."""


def driver_for(profile: AgentProfile) -> AgentDriver:
    """The driver of ``profile`` (its ``driver`` field is validated against :data:`DRIVERS`)."""
    return DRIVERS[profile.driver]


def end_all_sessions(task_id: str) -> None:
    """Close whatever any driver keeps open for ``task_id``; never raises."""
    for driver in DRIVERS.values():
        try:
            driver.end_session(task_id)
        except Exception:  # noqa: BLE001 - the process record kill in the caller still runs
            pass


def agent_stop_grace_ms(home: Path, agent_id: str | None) -> int:
    """:attr:`AgentDriver.stop_grace_ms` of ``agent_id``'s profile in ``home``; 0 when the agent
    is unknown or its profile cannot be read (the tree is then killed at once). Never raises."""
    from .profiles import load_profiles

    try:
        profile = load_profiles(home).get(agent_id or "")
        return driver_for(profile).stop_grace_ms(profile) if profile is not None else 0
    except Exception:  # noqa: BLE001 - a cancel must never fail on a profile
        return 0
