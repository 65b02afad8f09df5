"""The toolchain registry: every module of this package that exports ``TOOLCHAIN``.

A new toolchain is one file here (and its recorded outputs under ``tests/data/toolchains/<id>/``):
:func:`toolchains` imports every module of the package except the scaffolding (``base``,
``registry``, the ``formats`` subpackage), collects the :class:`~.base.Toolchain` each exports and
orders them by ``order`` (then id). A module that fails to import is logged and left out: one
broken toolchain never sinks the others.

The engines read the registry through :func:`toolchains`, :func:`count_formats` and
:func:`hinted_formats`; they never name a toolchain.
"""

from __future__ import annotations

import importlib
import logging
import pkgutil
from functools import lru_cache

from . import __name__ as _PACKAGE
from . import __path__ as _PATH
from .base import CountFormat, Toolchain

log = logging.getLogger("tianshu_mcp")

_SCAFFOLDING = frozenset({"base", "registry", "formats"})


@lru_cache(maxsize=1)
def toolchains() -> tuple[Toolchain, ...]:
    """Every registered toolchain, by ``order`` then ``id``. Imported once per process.

    Raises:
        ValueError: two modules declare the same toolchain id or count-format id (a packaging
            mistake, found by the registry's own test).
    """
    found: list[Toolchain] = []
    for info in pkgutil.iter_modules(_PATH):
        if info.name in _SCAFFOLDING or info.name.startswith("_"):
            continue
        try:
            module = importlib.import_module(f"{_PACKAGE}.{info.name}")
        except Exception as exc:  # noqa: BLE001 - one broken toolchain must not sink the others
            log.error("toolchain module %s could not be imported: %s: %s", info.name, type(exc).__name__, exc)
            continue
        tc = getattr(module, "TOOLCHAIN", None)
        if isinstance(tc, Toolchain):
            found.append(tc)
    found.sort(key=lambda t: (t.order, t.id))
    ids = [t.id for t in found]
    formats = [f.id for t in found for f in t.formats]
    for what, names in (("toolchain", ids), ("count format", formats)):
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"{what} ids declared twice: {', '.join(twice)}")
    return tuple(found)


@lru_cache(maxsize=1)
def count_formats() -> dict[str, CountFormat]:
    """Every count format by id, in ``priority`` order (the order tried when no command names one)."""
    every = [f for t in toolchains() for f in t.formats]
    return {f.id: f for f in sorted(every, key=lambda f: (f.priority, f.id))}


def machine_readable(runner: str) -> Toolchain | None:
    """The toolchain whose ``whole_lines`` count format produces ``runner`` (its id or one of its
    ``runners``), or None for a text form."""
    for tc in toolchains():
        if any(f.whole_lines and runner in (f.id, *f.runners) for f in tc.formats):
            return tc
    return None


def hinted_formats(argv_joined: str) -> list[str]:
    """The format ids the command names (lower-cased, space-joined argv), in registry order, each
    once: a toolchain whose ``hint`` matches contributes its ``hint_formats``."""
    order: list[str] = []
    if not argv_joined:
        return order
    for tc in toolchains():
        if tc.hint is not None and tc.hint.search(argv_joined):
            order += [f for f in tc.hint_formats if f not in order]
    return order
