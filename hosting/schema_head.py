"""Skip Prefect's migrations at a start that has nothing to migrate (docs/design-notes.md, note 85).

Prefect's API runs its migrations at every start (``alembic upgrade head``): importing alembic and
reading its ≈150 revision scripts took 60–150 ms of the API's start on a database already at the
head. A home's service records, in ``<home>/prefect/schema-head.json``, the revision its
database reached under the installed Prefect version: after a start whose migrations ran, and
when a new home is seeded from a template that version migrated (:mod:`.dbseed`). A later start
whose database still has exactly that revision, under the same Prefect version, turns the
migrations off for that start (``PREFECT_API_DATABASE_MIGRATE_ON_START=false``). Anything else
migrates as before: another Prefect version, a database restored from elsewhere (another
revision), no record, anything unreadable, or a Prefect configured (environment, profile) to use
another database than the home's file.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import MutableMapping
from pathlib import Path

from ..core.files import atomic_write_json, read_json_safe

MARKER = "schema-head.json"
MIGRATE_ENV = "PREFECT_API_DATABASE_MIGRATE_ON_START"


def prefect_version() -> str:
    """The installed Prefect's version string."""
    from importlib.metadata import version

    return version("prefect")


def revisions(db: Path) -> list[str] | None:
    """The sorted ``alembic_version`` rows of the SQLite database ``db`` (read-only), or None
    when it has none or cannot be read."""
    if not db.is_file():
        return None
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
        try:
            rows = conn.execute("SELECT version_num FROM alembic_version").fetchall()
        finally:
            conn.close()
    except sqlite3.Error:
        return None
    return sorted(str(r[0]) for r in rows) or None


def record(prefect_home: Path, revs: list[str] | None = None) -> bool:
    """Write the marker: ``revs`` (default: the database's own revisions) under the installed
    Prefect version. Returns False (nothing written) when there is no revision to record.

    Raises:
        OSError: the marker cannot be written (the callers go on without it: the next start
            migrates, a no-op, and records again).
    """
    revs = revs if revs is not None else revisions(prefect_home / "prefect.db")
    if not revs:
        return False
    atomic_write_json(prefect_home / MARKER, {"prefect": prefect_version(), "revisions": revs})
    return True


def at_recorded_head(prefect_home: Path) -> bool:
    """True when the marker names the installed Prefect version and the database's revisions
    are exactly the recorded ones; False on any difference or doubt."""
    data = read_json_safe(prefect_home / MARKER)
    if not isinstance(data, dict) or data.get("prefect") != prefect_version():
        return False
    revs = revisions(prefect_home / "prefect.db")
    return revs is not None and revs == data.get("revisions")


def is_home_database(prefect_home: Path, url: str) -> bool:
    """True when the database URL Prefect will use (its ``PREFECT_API_DATABASE_CONNECTION_URL``
    setting, the home's file by default) is the SQLite file ``<prefect_home>/prefect.db``: the
    only database this module records or skips migrations for. An environment or a Prefect
    profile naming another database migrates it as Prefect always does."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError):
        return False
    if not parsed.drivername.startswith("sqlite") or not parsed.database:
        return False
    return os.path.realpath(parsed.database) == os.path.realpath(prefect_home / "prefect.db")


def skip_if_at_head(prefect_home: Path, environ: MutableMapping[str, str], url: str) -> bool:
    """Set ``PREFECT_API_DATABASE_MIGRATE_ON_START=false`` in ``environ`` when ``url`` is the
    home's database (:func:`is_home_database`) and it is :func:`at_recorded_head`, else remove
    the variable; return whether migrations are off. Prefect reads the variable when its
    settings are built: the caller refreshes them after this call."""
    if is_home_database(prefect_home, url) and at_recorded_head(prefect_home):
        environ[MIGRATE_ENV] = "false"
        return True
    environ.pop(MIGRATE_ENV, None)
    return False


__all__ = ["MARKER", "MIGRATE_ENV", "at_recorded_head", "is_home_database", "record", "revisions", "skip_if_at_head"]
