"""The home's SQLite configuration (tianshu_mcp.hosting.sqlite_db; docs/design-notes.md, note 57):
a transaction holds the write lock from BEGIN, so a read-then-write never meets
``SQLITE_BUSY_SNAPSHOT``; the page cache is bounded; a PostgreSQL URL is left to Prefect.

Real SQLite files through Prefect's own engine and session code; the other writer is a plain
``sqlite3`` connection.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path

import pytest
import sqlalchemy as sa
from prefect.server.database.configurations import AioSqliteConfiguration
from prefect.server.database.dependencies import MODELS_DEPENDENCIES
from tianshu_mcp.hosting.sqlite_db import CACHE_KIB, HomeSqliteConfiguration, install


def _db(tmp_path: Path) -> tuple[Path, str]:
    path = tmp_path / "prefect.db"
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("CREATE TABLE labels (id INTEGER PRIMARY KEY, value TEXT)")
        conn.execute("INSERT INTO labels VALUES (1, 'a')")
    return path, f"sqlite+aiosqlite:///{path}"


def _other_writer_can_begin(path: Path) -> bool:
    """Whether another connection gets the write lock right now (no waiting)."""
    conn = sqlite3.connect(path, timeout=0, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("ROLLBACK")
        return True
    except sqlite3.OperationalError as exc:
        assert "locked" in str(exc), exc
        return False
    finally:
        conn.close()


async def _holds_write_lock_after_a_read(cfg: AioSqliteConfiguration, path: Path) -> bool:
    engine = await cfg.engine()
    try:
        session = await cfg.session(engine)
        async with session:
            async with cfg.begin_transaction(session):
                await session.execute(sa.text("SELECT value FROM labels WHERE id = 1"))
                return not await asyncio.to_thread(_other_writer_can_begin, path)
    finally:
        await engine.dispose()


@pytest.mark.parametrize("config", [AioSqliteConfiguration, HomeSqliteConfiguration])
def test_a_transaction_holds_the_write_lock_from_its_begin(tmp_path: Path, config: type) -> None:
    path, url = _db(tmp_path)
    held = asyncio.run(_holds_write_lock_after_a_read(config(connection_url=url), path))
    # Prefect's own configuration begins DEFERRED: a read holds no write lock, so a writer may
    # commit between this transaction's read and its write (the 503 of the module doc)
    assert held is (config is HomeSqliteConfiguration)


def test_a_read_then_write_waits_for_a_committing_writer_instead_of_failing(tmp_path: Path) -> None:
    path, url = _db(tmp_path)
    cfg = HomeSqliteConfiguration(connection_url=url)
    other_begins = threading.Event()
    other_done = threading.Event()
    other_error: list[BaseException] = []

    def other_writer() -> None:  # waits for the lock (busy timeout), then commits its own write
        try:
            conn = sqlite3.connect(path, timeout=60, isolation_level=None)
            other_begins.set()
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("UPDATE labels SET value = value || 'o' WHERE id = 1")
            conn.execute("COMMIT")
            conn.close()
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            other_error.append(exc)
        finally:
            other_done.set()

    async def read_then_write() -> str:
        engine = await cfg.engine()
        try:
            session = await cfg.session(engine)
            async with session:
                async with cfg.begin_transaction(session):
                    value = (await session.execute(sa.text("SELECT value FROM labels WHERE id = 1"))).scalar_one()
                    thread = threading.Thread(target=other_writer)
                    thread.start()
                    assert await asyncio.to_thread(other_begins.wait, 60)
                    # it cannot commit before this transaction ends, however long it is given
                    # (under BEGIN DEFERRED it commits here and the write below is refused)
                    assert not await asyncio.to_thread(other_done.wait, 0.5)
                    await session.execute(sa.text("UPDATE labels SET value = :v WHERE id = 1"), {"v": value + "t"})
                await asyncio.to_thread(thread.join, 60)
            async with engine.connect() as conn:
                return (await conn.execute(sa.text("SELECT value FROM labels WHERE id = 1"))).scalar_one()
        finally:
            await engine.dispose()

    final = asyncio.run(read_then_write())
    assert not other_error, other_error
    assert final == "ato"  # this transaction's write first, then the other writer's: nothing lost


def test_the_page_cache_is_bounded_per_connection(tmp_path: Path) -> None:
    _path, url = _db(tmp_path)

    async def cache_size(cfg: AioSqliteConfiguration) -> int:
        engine = await cfg.engine()
        try:
            async with engine.connect() as conn:
                return int((await conn.execute(sa.text("PRAGMA cache_size"))).scalar_one())
        finally:
            await engine.dispose()

    assert asyncio.run(cache_size(AioSqliteConfiguration(connection_url=url))) == 20000  # Prefect's ≈ 80 MiB
    assert asyncio.run(cache_size(HomeSqliteConfiguration(connection_url=url))) == -CACHE_KIB


def test_install_takes_sqlite_urls_only_and_is_idempotent(tmp_path: Path) -> None:
    before = MODELS_DEPENDENCIES.get("database_config")
    try:
        MODELS_DEPENDENCIES["database_config"] = None
        assert install("postgresql+asyncpg://u:p@localhost/prefect") is False
        assert MODELS_DEPENDENCIES["database_config"] is None
        url = f"sqlite+aiosqlite:///{tmp_path / 'a.db'}"
        assert install(url) is True
        first = MODELS_DEPENDENCIES["database_config"]
        assert isinstance(first, HomeSqliteConfiguration) and first.connection_url == url
        assert install(url) is True and MODELS_DEPENDENCIES["database_config"] is first
    finally:
        MODELS_DEPENDENCIES["database_config"] = before
