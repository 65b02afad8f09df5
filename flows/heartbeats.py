"""A flow-run process ends as soon as its flow run is final, not up to 1 s later
(docs/design-notes.md, note 77; docs/prefect-facts.md P13).

Prefect's flow engine sends the run's heartbeats from a daemon thread
(:func:`prefect.flow_engine._send_heartbeats`) that sleeps in steps of 1 s and checks between
them whether it should stop. A sync engine joins that thread when the flow function returns, after
the final state is set, so every flow-run process lived 0–1 s longer than its flow run: 0.58 s on
average in the service's engines (py-spy), with its memory held and, in the service's tree, beside
the next task's engine. Prefect's own async engine does not join (``join_on_exit=False``): the
thread is a daemon and stops at its next step or with the process.

:func:`install` has the sync engine do the same. Nothing of the heartbeats changes while the flow
runs (zombie detection, docs/isolation.md); after the final state, Prefect's loop sends none
anyway (it checks for a final state before each one).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any, Callable

_installed = False


def unjoined(send: Callable[..., AbstractContextManager[None]]) -> Callable[..., AbstractContextManager[None]]:
    """``send`` (Prefect's ``_send_heartbeats(engine, join_on_exit=True)``) with ``join_on_exit``
    always False: leaving the context stops the thread without waiting for it."""

    @contextmanager
    def send_heartbeats(engine: Any, join_on_exit: bool = True) -> Iterator[None]:
        with send(engine, join_on_exit=False):
            yield

    send_heartbeats.prefect_send = send  # type: ignore[attr-defined]  # what it wraps (tests)
    return send_heartbeats


def install() -> bool:
    """Have Prefect's flow engine leave the heartbeat thread unjoined (idempotent). Returns False,
    changing nothing, when this Prefect has no such hook or it takes no ``join_on_exit`` (a
    release that changed it: the engine then joins as before)."""
    global _installed
    if _installed:
        return True
    import inspect

    import prefect.flow_engine as engine

    send = getattr(engine, "_send_heartbeats", None)
    if not callable(send) or "join_on_exit" not in inspect.signature(send).parameters:
        return False
    engine._send_heartbeats = unjoined(send)  # type: ignore[attr-defined]
    _installed = True
    return True
