"""A new home's Prefect database starts as a copy of a migrated template (cold start, docs/architecture.md
§3).

Prefect creates its SQLite database by running every migration on first start: ≈11 CPU-s, most
of a new home's 12–16 s cold start. The schema is the same for every home of one Prefect
version, so :func:`seed_database` copies a migrated, empty database into a home that has none;
the server then finds it at the head revision and skips the migrations.

The template lives in the user's cache (``$XDG_CACHE_HOME/tianshu-mcp``, else
``~/.cache/tianshu-mcp``), one file per Prefect version, made once per machine by
``prefect server database upgrade`` against a temporary file (under a file lock, so concurrent
first starts make it once) and renamed into place when complete. It holds no home's data:
no work pool, deployment or run (those are created per home after the API is up). Anything
going wrong falls back to Prefect's own migrations; a seeded copy is written to a temporary
name and renamed, so a home never sees half a database.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from filelock import FileLock, Timeout

log = logging.getLogger("tianshu_mcp")

TEMPLATE_TIMEOUT_S = 180
"""The most a template's migrations may take (the first start on a machine), s."""


def cache_dir() -> Path:
    """``$XDG_CACHE_HOME/tianshu-mcp`` or ``~/.cache/tianshu-mcp``."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "tianshu-mcp"


def template_path() -> Path:
    """``<cache>/prefect-<version>.db`` for the installed Prefect."""
    from importlib.metadata import version

    return cache_dir() / f"prefect-{version('prefect')}.db"


def _make_template(target: Path) -> None:
    """Migrate an empty database at a temporary name next to ``target``, then rename it.

    Raises:
        RuntimeError: the migrations failed (their output is in the message).
        OSError: the cache cannot be written.
    """
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".template-") as tmp:
        db = Path(tmp) / "prefect.db"
        env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
        env.update({"PREFECT_HOME": tmp, "PREFECT_API_DATABASE_CONNECTION_URL": f"sqlite+aiosqlite:///{db}",
                    "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "PREFECT_CLI_COLORS": "false"})
        out = subprocess.run([sys.executable, "-m", "prefect", "server", "database", "upgrade", "-y"], env=env,
                             cwd=tmp, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                             timeout=TEMPLATE_TIMEOUT_S, check=False)
        if out.returncode != 0 or not db.is_file():
            raise RuntimeError(f"prefect server database upgrade exited {out.returncode}: "
                               f"{(out.stdout + out.stderr).strip()[-500:]}")
        os.replace(db, target)


def seed_database(prefect_home: Path) -> bool:
    """Copy the migrated template to ``<prefect_home>/prefect.db`` when that file does not exist.

    Args:
        prefect_home: the home's Prefect directory (``<home>/prefect``).

    Returns:
        True when the database was seeded; False when it already existed or seeding was not
        possible (Prefect then migrates a new database itself). Never raises.
    """
    db = Path(prefect_home) / "prefect.db"
    if db.exists():
        return False
    try:
        template = template_path()
        template.parent.mkdir(parents=True, exist_ok=True)
        if not template.is_file():
            with FileLock(str(template) + ".lock", timeout=TEMPLATE_TIMEOUT_S):
                if not template.is_file():
                    _make_template(template)
        partial = db.with_name(f".prefect.db.seed-{os.getpid()}")
        shutil.copyfile(template, partial)
        if db.exists():  # another process of this home made one meanwhile: keep it
            partial.unlink(missing_ok=True)
            return False
        os.replace(partial, db)
        from .schema_head import record, revisions

        with contextlib.suppress(OSError):  # no record: the first start migrates (a no-op) and records
            record(prefect_home, revisions(template))  # migrated by this Prefect version: starts skip them
        return True
    except (OSError, RuntimeError, Timeout, subprocess.SubprocessError) as exc:
        log.warning("the Prefect database of %s is created by its own migrations (no template: %s)", prefect_home, exc)
        return False
