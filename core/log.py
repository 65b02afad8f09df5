"""Logging: stderr and ``<home>/logs/server.log``, never stdout (docs/tools.md §4, docs/architecture.md
§6)."""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path
from typing import Any

LOGGER_NAME = "tianshu_mcp"


class _UtcFormatter(logging.Formatter):
    converter = time.gmtime

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:  # noqa: N802
        ct = self.converter(record.created)
        return time.strftime("%Y-%m-%dT%H:%M:%S", ct) + f".{int(record.msecs):03d}Z"


def setup_logging(home: Path, level: int = logging.INFO, file_name: str | None = "server.log") -> logging.Logger:
    """Route the ``tianshu_mcp`` logger to stderr and ``<home>/logs/<file_name>`` (``server.log``;
    None: stderr only, for a process whose stderr already is its log file).

    Lines read ``[<ISO-8601 UTC>] [<LEVEL>] <msg>``. Idempotent: calling twice adds no handler.
    Returns the configured logger.
    """
    logger = logging.getLogger(LOGGER_NAME)
    logger.setLevel(level)
    if getattr(logger, "_tianshu_configured", False):
        return logger
    fmt = _UtcFormatter("[%(asctime)s] [%(levelname)s] %(message)s")
    (home / "logs").mkdir(parents=True, exist_ok=True)
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if file_name:
        handlers.append(logging.FileHandler(home / "logs" / file_name, encoding="utf-8"))
    for handler in handlers:
        handler.setFormatter(fmt)
        logger.addHandler(handler)
    logger.propagate = False
    logger._tianshu_configured = True  # type: ignore[attr-defined]
    return logger


def forget_logging() -> None:
    """Undo :func:`setup_logging` in this process: the ``tianshu_mcp`` logger without handlers,
    level or ``propagate = False``, as a fresh interpreter has it; its handlers are closed (a
    log file's descriptor with them, stderr stays open). For a process forked from a configured
    one that must log as a new interpreter would (:mod:`tianshu_mcp.hosting.shared_fork`)."""
    logger = logging.getLogger(LOGGER_NAME)
    for handler in list(logger.handlers):
        logger.removeHandler(handler)
        handler.close()
    logger.setLevel(logging.NOTSET)
    logger.propagate = True
    logger.__dict__.pop("_tianshu_configured", None)


class PlainConsoleHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """The console handler of Prefect's logging config in every process of ours
    (``PREFECT_LOGGING_HANDLERS_CONSOLE_CLASS``, :data:`~tianshu_mcp.deployments.topology.FORCED_ENV`):
    the same lines as Prefect's ``PrefectConsoleHandler`` writes to a file or pipe (its
    formatter, no wrapping, no colour), without rendering each through Rich: 3–12 ms a line in
    a flow-run process, ≈30 ms per task, part of it before the agent starts (design note 77).

    Args:
        stream: where lines go (Prefect's config: ``sys.stderr``).
        styles: Prefect's colour theme, accepted and unused (its config passes it).
    """

    def __init__(self, stream: Any = None, styles: dict[str, str] | None = None, **_: Any) -> None:
        super().__init__(stream)

    def handleError(self, record: logging.LogRecord) -> None:  # noqa: N802 - logging's name
        """A stream already closed at the process's end is ignored, as Prefect's own stream
        handler does; any other failure (a bad format string too) is reported as the standard
        handler reports it."""
        exc = sys.exc_info()[1]
        if isinstance(exc, ValueError) and "closed file" in str(exc):
            return
        super().handleError(record)
