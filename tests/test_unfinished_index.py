"""The index of unfinished records (core/unfinished.py): run_task's answer and the merge check read
only the records that can be unfinished, and the index never misses one."""

from __future__ import annotations

import multiprocessing
import os
from pathlib import Path

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from tianshu_mcp.core.ids import new_task_id
from tianshu_mcp.core.taskstore import TaskStore
from tianshu_mcp.core.unfinished import INDEX_NAME

FINISHED = "2026-12-01T00:00:00.000Z"


def scan_all(store: TaskStore) -> set[str]:
    """The unfinished records found the old way: every record read."""
    return {i for i in store.list_ids(("tsk_", "vfy_")) if not (store.read(i) or {}).get("finishedAt")}


def index_dir(home: Path) -> Path:
    return home / "tasks" / INDEX_NAME


def drop_index(home: Path) -> None:
    """Leave the home as a version without the index did."""
    for name in os.listdir(index_dir(home)):
        os.unlink(index_dir(home) / name)
    os.rmdir(index_dir(home))


def test_a_record_is_in_the_index_exactly_while_it_is_unfinished(tmp_path: Path) -> None:
    store = TaskStore(tmp_path)
    a, b = new_task_id(), new_task_id()
    store.create(a, {"projectPath": "/p", "isolation": "inplace"})
    store.create(b, {"projectPath": "/p", "finishedAt": FINISHED})
    assert sorted(os.listdir(index_dir(tmp_path))) == [a]
    assert store.unfinished_inplace("/p")["taskId"] == a  # type: ignore[index]
    store.update(a, lastMessage="still going")
    assert os.listdir(index_dir(tmp_path)) == [a]
    store.update(a, finishedAt=FINISHED)
    assert os.listdir(index_dir(tmp_path)) == []
    assert store.unfinished_inplace("/p") is None
    store.update(a, finishedAt=None)  # a rework reopens it
    assert os.listdir(index_dir(tmp_path)) == [a]
    assert store.unfinished_inplace("/p")["taskId"] == a  # type: ignore[index]


def test_the_answer_reads_only_unfinished_records(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    store = TaskStore(tmp_path)
    for i in range(200):
        store.create(new_task_id(), {"projectPath": f"/old{i}", "finishedAt": FINISHED})
    live = new_task_id()
    store.create(live, {"projectPath": "/p", "isolation": "inplace"})
    read: list[str] = []
    real = TaskStore.read_cached

    def spy(self: TaskStore, task_id: str):  # type: ignore[no-untyped-def]
        read.append(task_id)
        return real(self, task_id)

    monkeypatch.setattr(TaskStore, "read_cached", spy)
    assert store.unfinished_inplace("/p")["taskId"] == live  # type: ignore[index]
    assert read == [live]


def test_a_home_written_before_the_index_is_scanned_and_reading_creates_nothing(tmp_path: Path) -> None:
    store = TaskStore(tmp_path)
    old_open, old_done = new_task_id(), new_task_id()
    store.create(old_open, {"projectPath": "/p", "isolation": "inplace"})
    store.create(old_done, {"projectPath": "/q", "finishedAt": FINISHED})
    drop_index(tmp_path)
    before = sorted(os.listdir(tmp_path / "tasks"))
    assert TaskStore(tmp_path).unfinished_inplace("/p")["taskId"] == old_open  # type: ignore[index]
    assert sorted(os.listdir(tmp_path / "tasks")) == before
    newer = new_task_id()
    TaskStore(tmp_path).create(newer, {"projectPath": "/r"})  # the first write builds it
    assert sorted(os.listdir(index_dir(tmp_path))) == sorted([old_open, newer])
    assert not [n for n in os.listdir(tmp_path / "tasks") if n.endswith(".tmp")]


def test_stale_entries_are_dropped_without_making_directories(tmp_path: Path) -> None:
    store = TaskStore(tmp_path)
    done, ghost = new_task_id(), new_task_id()
    store.create(done, {"projectPath": "/p"})
    store.update(done, finishedAt=FINISHED)
    (index_dir(tmp_path) / done).touch()  # a writer stopped between the record and the removal
    (index_dir(tmp_path) / ghost).touch()  # an entry whose record directory does not exist
    assert store.unfinished() == []
    assert os.listdir(index_dir(tmp_path)) == []
    assert not (tmp_path / "tasks" / ghost).exists()


def _writer(home: str, n: int, seed: int, out: "multiprocessing.Queue[list[str]]") -> None:
    store = TaskStore(Path(home))
    left_open = []
    for i in range(n):
        task_id = new_task_id()
        store.create(task_id, {"projectPath": f"/w{seed}"})
        if (i + seed) % 3:
            store.update(task_id, finishedAt=FINISHED)
        else:
            left_open.append(task_id)
    out.put(left_open)


def test_writers_racing_the_first_build_lose_no_entry(tmp_path: Path) -> None:
    """Records written by an earlier version, then four processes writing at once while each of
    them may be the one that builds the index: afterwards it holds every unfinished record."""
    store = TaskStore(tmp_path)
    early = [new_task_id() for _ in range(150)]
    for i, task_id in enumerate(early):
        store.create(task_id, {"projectPath": "/early", **({"finishedAt": FINISHED} if i % 2 else {})})
    drop_index(tmp_path)
    ctx = multiprocessing.get_context("spawn")
    out: multiprocessing.Queue[list[str]] = ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(str(tmp_path), 25, seed, out)) for seed in range(4)]
    for p in procs:
        p.start()
    opened = [task_id for _ in procs for task_id in out.get(timeout=120)]
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    expected = scan_all(store)
    assert set(opened) <= expected
    assert set(os.listdir(index_dir(tmp_path))) == expected
    assert {t["taskId"] for t in store.unfinished()} == expected


class IndexMachine(RuleBasedStateMachine):
    """Any sequence of creations, finishes, reopenings, stale entries and lost indexes: the index's
    answer equals a scan of every record."""

    def __init__(self) -> None:
        super().__init__()
        import tempfile

        self.home = Path(tempfile.mkdtemp(prefix="unfinished-index-"))
        self.store = TaskStore(self.home)
        self.ids: list[str] = []

    @rule(finished=st.booleans(), prefix=st.sampled_from(["tsk_", "vfy_"]))
    def create(self, finished: bool, prefix: str) -> None:
        task_id = prefix + new_task_id()[4:]
        self.store.create(task_id, {"projectPath": "/p", **({"finishedAt": FINISHED} if finished else {})})
        self.ids.append(task_id)

    @rule(data=st.data(), finished=st.booleans())
    def update(self, data: st.DataObject, finished: bool) -> None:
        if self.ids:
            task_id = data.draw(st.sampled_from(self.ids))
            self.store.update(task_id, finishedAt=FINISHED if finished else None)

    @rule(data=st.data())
    def stale_entry(self, data: st.DataObject) -> None:
        if self.ids and index_dir(self.home).is_dir():
            (index_dir(self.home) / data.draw(st.sampled_from(self.ids))).touch()

    @rule()
    def lose_the_index(self) -> None:
        if index_dir(self.home).is_dir():
            drop_index(self.home)

    @invariant()
    def matches_a_full_scan(self) -> None:
        found = [t["taskId"] for t in self.store.unfinished()]
        assert set(found) == scan_all(self.store)
        assert found == [t["taskId"] for t in self.store.unfinished(every=True)]

    def teardown(self) -> None:
        import shutil

        shutil.rmtree(self.home, ignore_errors=True)


TestIndexMachine = IndexMachine.TestCase
TestIndexMachine.settings = settings(max_examples=40, stateful_step_count=25, deadline=None)


def test_the_last_accepted_comes_first_and_the_merge_check_reads_every_record(tmp_path: Path) -> None:
    """Ids made within one second do not sort in acceptance order: the answer names the task
    accepted last. A record that a stdio server of an earlier version wrote (no index entry) is
    still seen by the scan of every record, which the merge check uses."""
    store = TaskStore(tmp_path)
    ids = [new_task_id() for _ in range(4)]
    for seq, task_id in zip((3, 1, 4, 2), ids):
        store.create(task_id, {"projectPath": "/p", "isolation": "inplace", "acceptedSeq": seq})
    assert [t["acceptedSeq"] for t in store.unfinished()] == [4, 3, 2, 1]
    assert store.unfinished_inplace("/p")["acceptedSeq"] == 4  # type: ignore[index]
    (index_dir(tmp_path) / ids[2]).unlink()  # as if an earlier version had written it
    assert ids[2] not in [t["taskId"] for t in store.unfinished()]
    assert ids[2] == store.unfinished(every=True)[0]["taskId"]


def test_a_file_where_the_index_belongs_is_replaced_not_an_error(tmp_path: Path) -> None:
    store = TaskStore(tmp_path)
    done = new_task_id()
    store.create(done, {"projectPath": "/q", "finishedAt": FINISHED})
    (tmp_path / "tasks" / INDEX_NAME).write_text("not a directory")
    assert store.unfinished() == []  # read: scanned, nothing made
    live = new_task_id()
    store.create(live, {"projectPath": "/p"})
    assert os.listdir(index_dir(tmp_path)) == [live]
    assert store.unfinished_inplace("/p")["taskId"] == live  # type: ignore[index]
