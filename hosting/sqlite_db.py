"""The home's embedded SQLite database as the Prefect API uses it: writes that queue for the lock
instead of failing, and a page cache that does not grow with the history (docs/design-notes.md,
note 57).

Prefect opens its write transactions ``BEGIN DEFERRED`` unless the caller asks for row locks. A
deferred transaction that reads and then writes (``PATCH /flow_runs/<id>/labels`` reads the
labels, merges, writes them) cannot be promoted once another connection has committed since
its read: SQLite refuses at once (``SQLITE_BUSY_SNAPSHOT``; the busy timeout does not apply), the
API answers 503, and after the client's retries the worker gives up on the flow run ("Failed to
submit flow run to infrastructure"), so the task ends ``interrupted`` before its agent starts.
A 160-task soak with two tasks at once lost 2 tasks that way. :class:`HomeSqliteConfiguration`
begins every transaction ``BEGIN IMMEDIATE``: it takes the write lock first and waits for it
(the busy timeout, 60 s), as SQLite advises for read-then-write transactions; SQLite has one
writer at a time anyway.

Prefect also sets ``cache_size = 20000`` pages (≈ 80 MiB) per pooled connection, and the API
holds ≈15 connections: a cache that may grow to 1.2 GB as the database grows with the history
(≈0.3 MB per task). The page cache is bounded to :data:`CACHE_KIB` per connection; the
operating system's file cache still holds the database.

:func:`install` puts the configuration where Prefect looks for it
(``prefect.server.database.dependencies.MODELS_DEPENDENCIES``), before the API first touches
the database. A PostgreSQL URL is left to Prefect.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from prefect.server.database.configurations import AioSqliteConfiguration

CACHE_KIB = 2048
"""SQLite page cache per connection, KiB (``PRAGMA cache_size = -2048``: SQLite's own default
size). The API holds ≈15 connections (one pool per event loop of its services)."""


class HomeSqliteConfiguration(AioSqliteConfiguration):
    """Prefect's SQLite configuration with ``BEGIN IMMEDIATE`` write transactions and a page
    cache of :data:`CACHE_KIB` per connection (module doc)."""

    @asynccontextmanager
    async def begin_transaction(self, session: Any, with_for_update: bool = False) -> AsyncIterator[Any]:
        """A transaction that holds the write lock from ``BEGIN`` (``with_for_update`` is
        implied); it waits up to the busy timeout for another writer to commit."""
        async with super().begin_transaction(session, with_for_update=True) as transaction:
            yield transaction

    def setup_sqlite(self, conn: Any, record: Any) -> None:
        """Prefect's pragmas, then the bounded page cache."""
        super().setup_sqlite(conn, record)
        cursor = conn.cursor()
        cursor.execute(f"PRAGMA cache_size = -{CACHE_KIB};")
        cursor.close()


def install(connection_url: str) -> bool:
    """Make :class:`HomeSqliteConfiguration` Prefect's database configuration when
    ``connection_url`` is a SQLite URL; call before the API serves. Returns whether it did."""
    from prefect.server.database.dependencies import MODELS_DEPENDENCIES

    if not connection_url.startswith("sqlite"):
        return False
    current = MODELS_DEPENDENCIES.get("database_config")
    if not isinstance(current, HomeSqliteConfiguration) or current.connection_url != connection_url:
        MODELS_DEPENDENCIES["database_config"] = HomeSqliteConfiguration(connection_url=connection_url)
    return True
