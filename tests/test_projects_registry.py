"""``<home>/projects.json`` (core/projects.py): run_task registers its project on every call; the
file is rewritten only when the entry changes or ``lastSeenAt`` is more than a minute old
(design note 77), and a corrupt file is never overwritten."""

from __future__ import annotations

import json
import os
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from tianshu_mcp.core import projects
from tianshu_mcp.core.errors import ErrorCode, TianshuError
from tianshu_mcp.core.paths import project_key
from tianshu_mcp.core.projects import ProjectRegistry


def _iso(at: datetime) -> str:
    return at.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def test_a_registration_within_the_minute_leaves_the_file_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    reg, norm = ProjectRegistry(tmp_path), str(tmp_path / "proj")
    first = reg.register(norm)
    assert first["firstSeenAt"] == first["lastSeenAt"] and first["path"] == norm
    written: list[Path] = []
    real = projects.atomic_write_json
    monkeypatch.setattr(projects, "atomic_write_json", lambda path, data, **kw: (written.append(path), real(path, data, **kw)))
    inode = os.stat(reg.path).st_ino
    assert reg.register(norm) == first
    assert written == [] and os.stat(reg.path).st_ino == inode

    # a new display path, another project, or a stale lastSeenAt: written
    assert reg.register(norm, "~/proj")["displayPath"] == "~/proj"
    assert reg.register(str(tmp_path / "other"))["path"] == str(tmp_path / "other")
    assert len(written) == 2
    data = json.loads(reg.path.read_text())
    stale = _iso(datetime.now(timezone.utc) - timedelta(seconds=projects.SEEN_PRECISION_S + 5))
    data[project_key(norm)]["lastSeenAt"] = stale
    reg.path.write_text(json.dumps(data))
    again = reg.register(norm, "~/proj")
    assert len(written) == 3 and again["lastSeenAt"] > stale and again["firstSeenAt"] == first["firstSeenAt"]


@pytest.mark.parametrize("seen", ["", "yesterday", "2026-12-05T10:00:00", None])
def test_an_unreadable_or_naive_last_seen_is_rewritten(tmp_path: Path, seen: str | None) -> None:
    norm = str(tmp_path / "proj")
    (tmp_path / "projects.json").write_text(json.dumps({project_key(norm): {"path": norm, "lastSeenAt": seen}}))
    entry = ProjectRegistry(tmp_path).register(norm)
    assert entry["lastSeenAt"] != seen and entry["lastSeenAt"].endswith("Z")


def test_a_clock_set_back_rewrites_the_entry(tmp_path: Path) -> None:
    """A ``lastSeenAt`` in the future (the clock was set back) is not "fresh"."""
    norm = str(tmp_path / "proj")
    future = _iso(datetime.now(timezone.utc) + timedelta(hours=1))
    (tmp_path / "projects.json").write_text(json.dumps({project_key(norm): {"path": norm, "lastSeenAt": future}}))
    assert ProjectRegistry(tmp_path).register(norm)["lastSeenAt"] < future


def test_a_corrupt_file_is_reported_and_left_untouched(tmp_path: Path) -> None:
    (tmp_path / "projects.json").write_text("{not json")
    with pytest.raises(TianshuError) as err:
        ProjectRegistry(tmp_path).register(str(tmp_path / "proj"))
    assert err.value.code == ErrorCode.CONFIG_INVALID
    assert (tmp_path / "projects.json").read_text() == "{not json"


def test_an_unchanged_file_is_parsed_once_and_an_edit_by_anyone_is_seen(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The parse is kept while the file's inode, mtime (ns) and size stay the same (design note
    83); a hand edit in place, a replacement and damage are all seen at the next read, and what a
    caller does to a returned entry does not reach the kept parse."""
    reg, norm = ProjectRegistry(tmp_path), str(tmp_path / "proj")
    for i in range(30):
        reg.register(str(tmp_path / f"other{i}"))
    reg.register(norm)
    parsed: list[Path] = []
    real = projects.read_json
    monkeypatch.setattr(projects, "read_json", lambda path: (parsed.append(path), real(path))[1])
    for _ in range(5):
        assert ProjectRegistry(tmp_path).register(norm)["path"] == norm
        assert ProjectRegistry(tmp_path).get(norm)["path"] == norm  # type: ignore[index]
    assert parsed == []
    ProjectRegistry(tmp_path).get(norm)["verify"] = ["mutated by a caller"]  # type: ignore[index]
    assert "verify" not in ProjectRegistry(tmp_path).get(norm)  # type: ignore[operator]

    path = tmp_path / "projects.json"
    data = json.loads(path.read_text())
    data[project_key(norm)]["verify"] = ["pytest -q"]
    with open(path, "r+") as fh:  # an edit in place: the same inode
        fh.write(json.dumps(data))
        fh.truncate()
    assert ProjectRegistry(tmp_path).get(norm)["verify"] == ["pytest -q"]  # type: ignore[index]
    data[project_key(norm)]["defaultAgentId"] = "codex"
    (tmp_path / "new.json").write_text(json.dumps(data))
    os.replace(tmp_path / "new.json", path)  # a replacement: a new inode
    assert ProjectRegistry(tmp_path).get(norm)["defaultAgentId"] == "codex"  # type: ignore[index]
    path.write_text("{ damaged")
    with pytest.raises(TianshuError) as err:
        ProjectRegistry(tmp_path).get(norm)
    assert err.value.code == ErrorCode.CONFIG_INVALID
