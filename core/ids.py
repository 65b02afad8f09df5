"""Task and verify-record identifiers (docs/tools.md §2.6, docs/agents-tasks.md §2.2)."""

from __future__ import annotations

import re
import secrets
from datetime import datetime

TASK_ID_RE = re.compile(r"^tsk_\d{14}_[0-9a-f]{6}$")
VERIFY_ID_RE = re.compile(r"^vfy_\d{14}_[0-9a-f]{6}$")


def _new_id(prefix: str, now: datetime | None = None) -> str:
    stamp = (now or datetime.now()).strftime("%Y%m%d%H%M%S")
    return f"{prefix}_{stamp}_{secrets.token_hex(3)}"


def new_task_id(now: datetime | None = None) -> str:
    """Return ``tsk_<yyyyMMddHHmmss local>_<6 hex>``, e.g. ``tsk_20261130091500_a1b2c3``."""
    return _new_id("tsk", now)


def new_verify_id(now: datetime | None = None) -> str:
    """Return ``vfy_<yyyyMMddHHmmss local>_<6 hex>`` for a standalone verify record."""
    return _new_id("vfy", now)


def is_record_id(value: str) -> bool:
    """True when ``value`` has the shape of a task or verify-record id (safe as a dir name)."""
    return bool(TASK_ID_RE.match(value) or VERIFY_ID_RE.match(value))
