"""Skill self-install (docs/agents-tasks.md §2.14): every cell of the decision table on real
directories, the manifest and its content hash, the atomic swap with rollback, backup pruning,
stale ``.incoming`` cleanup, the lock, the switches, an unwritable target, and the real console
script installing in the background while ``tools/list`` answers."""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import shutil
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from conftest import CONSOLE, mcp_client, server_env
from tianshu_mcp import __version__
from tianshu_mcp.core import skill_install as si
from tianshu_mcp.core.settings import ServerConfig
from tianshu_mcp.mcp_server import skill_boot

MANIFEST_KEYS = {"schema", "name", "packageVersion", "contentHash", "installedAt", "sourceDir"}
# a Prefect API nobody serves: the stdio server then hosts nothing (remote mode) and tools/list
# never needs Prefect
NO_PREFECT = {"TIANSHU_PREFECT_API_URL": "http://127.0.0.1:9/api"}


def make_tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


@pytest.fixture
def src(tmp_path: Path) -> Path:
    """The "package" skill (v2)."""
    return make_tree(tmp_path / "pkg" / "tianshu-mcp", {"SKILL.md": "# skill v2\n", "ref/usage.md": "usage v2\n"})


@pytest.fixture
def old_src(tmp_path: Path) -> Path:
    """An older package's skill (v1)."""
    return make_tree(tmp_path / "old-pkg" / "tianshu-mcp", {"SKILL.md": "# skill v1\n", "ref/usage.md": "usage v1\n"})


def snapshot(root: Path) -> dict[str, bytes]:
    """Every regular file under ``root`` (manifest included) by relative path."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def siblings(target: Path, kind: str) -> list[Path]:
    return sorted(p for p in target.parent.iterdir() if p.name.startswith(f".{target.name}.{kind}-"))


def build_state(state: si.TargetState, target: Path, src: Path, old_src: Path) -> None:
    """Put ``target`` into ``state`` relative to the package ``src``."""
    if state == si.TargetState.ABSENT:
        return
    if state == si.TargetState.CURRENT:  # equal content, no manifest: the skip repairs it
        shutil.copytree(src, target)
    elif state in (si.TargetState.STALE, si.TargetState.LOCAL_EDITS):
        assert si.install_skill(old_src, target, package_version="0.0.9").changed
        if state == si.TargetState.LOCAL_EDITS:
            (target / "SKILL.md").write_text("# skill v1, tuned by the user\n")
    else:  # unknown origin: a hand-made directory without manifest
        make_tree(target, {"SKILL.md": "# hand-made\n"})


EXPECTED: dict[tuple[str, str], tuple[si.Action, str | None]] = {}
for _m in si.MODES:
    EXPECTED[("absent", _m)] = (si.Action.INSTALL, None)
    EXPECTED[("current", _m)] = (si.Action.SKIP, None)
    EXPECTED[("stale", _m)] = ((si.Action.HOLD, si.SKILL_UPDATE_PENDING) if _m == "prompt"
                               else (si.Action.OVERWRITE, si.SKILL_UPDATED))
    EXPECTED[("local_edits", _m)] = (si.Action.KEEP, si.SKILL_LOCAL_EDITS)
    EXPECTED[("unknown", _m)] = ((si.Action.OVERWRITE, si.SKILL_UPDATED) if _m == "approve"
                                 else (si.Action.KEEP, si.SKILL_UNKNOWN_SOURCE))


@pytest.mark.parametrize(("state", "mode"), sorted(EXPECTED))
def test_decision_table_cell(tmp_path: Path, src: Path, old_src: Path, state: str, mode: si.Mode) -> None:
    """One cell of the 5 × 3 table: the pure decision and what the install does on disk."""
    action, code = EXPECTED[(state, mode)]
    decision = si.decide(si.TargetState(state), mode)
    assert (decision.action, decision.code) == (action, code)

    target = tmp_path / "skills" / "tianshu-mcp"
    build_state(si.TargetState(state), target, src, old_src)
    before = snapshot(target) if target.exists() else None
    package_hash = si.hash_tree(src)

    result = si.install_skill(src, target, mode=mode, package_version="1.2.3")

    assert not result.failed
    assert result.decision == decision
    assert [w.split("]")[0] for w in result.warnings] == ([f"[{code}"] if code else [])
    manifest = si.read_manifest(target)
    if action in (si.Action.INSTALL, si.Action.OVERWRITE, si.Action.SKIP):
        assert si.hash_tree(target) == package_hash
        assert manifest is not None and manifest.content_hash == package_hash
        assert manifest.package_version == "1.2.3" and manifest.pending_update is None
    if action == si.Action.INSTALL:
        assert result.changed and result.backup is None and siblings(target, "bak") == []
    if action == si.Action.SKIP:  # the missing manifest was written, the content untouched
        assert not result.changed and siblings(target, "bak") == []
        assert {k: v for k, v in snapshot(target).items() if k != si.MANIFEST_NAME} == before
    if action == si.Action.OVERWRITE:
        assert result.changed and siblings(target, "bak") == [result.backup]
        assert snapshot(result.backup) == before  # the old tree, manifest and all
    if action == si.Action.KEEP:
        assert not result.changed and snapshot(target) == before and siblings(target, "bak") == []
        assert "not" in decision.text.lower()
    if action == si.Action.HOLD:
        assert not result.changed
        assert {k: v for k, v in snapshot(target).items() if k != si.MANIFEST_NAME} == {
            k: v for k, v in before.items() if k != si.MANIFEST_NAME}
        assert manifest is not None and manifest.pending_update is not None
        assert manifest.pending_update.content_hash == package_hash
        assert manifest.pending_update.package_version == "1.2.3"
        assert manifest.content_hash == si.hash_tree(target)  # still the record of what is installed
        assert si.inspect_target(target, package_hash)[0] == si.TargetState.STALE  # next start: the same cell
    assert siblings(target, "incoming") == []


def test_decide_rejects_an_unknown_mode() -> None:
    with pytest.raises(ValueError):
        si.decide(si.TargetState.ABSENT, "always")  # type: ignore[arg-type]


def test_manifest_content_and_hash_exclusions(tmp_path: Path, src: Path) -> None:
    noisy = make_tree(tmp_path / "noisy" / "tianshu-mcp", {
        "SKILL.md": "# skill v2\n", "ref/usage.md": "usage v2\n", ".DS_Store": "x", "Thumbs.db": "x",
        "desktop.ini": "x", "._SKILL.md": "x", ".gitignore": "x", ".git/HEAD": "x", "ref/.DS_Store": "x",
        si.MANIFEST_NAME: "{}", f"{si.MANIFEST_NAME}.123.abcdef.tmp": "x"})
    assert si.hash_tree(noisy) == si.hash_tree(src)  # the noise does not count
    target = tmp_path / "skills" / "tianshu-mcp"
    result = si.install_skill(noisy, target, package_version=__version__)
    assert result.changed
    assert sorted(snapshot(target)) == [si.MANIFEST_NAME, "SKILL.md", "ref/usage.md"]  # noise never copied
    data = json.loads((target / si.MANIFEST_NAME).read_text())
    assert set(data) == MANIFEST_KEYS
    assert data["schema"] == 1 and data["name"] == "tianshu-mcp" and data["packageVersion"] == __version__
    assert data["contentHash"] == si.hash_tree(src) == si.hash_tree(target)
    assert data["sourceDir"] == str(noisy) and data["installedAt"].endswith("Z")
    # noise and manifest edits in the target leave it "current"; a real edit does not
    make_tree(target, {".DS_Store": "y", "ref/._usage.md": "y", ".git/config": "y"})
    (target / si.MANIFEST_NAME).write_text(json.dumps({**data, "installedAt": "2000-01-01T00:00:00.000Z"}))
    assert si.inspect_target(target, si.hash_tree(src))[0] == si.TargetState.CURRENT
    (target / "ref" / "usage.md").write_text("usage v2 edited\n")
    assert si.hash_tree(target) != si.hash_tree(src)
    # renaming a file changes the hash even with equal bytes
    other = make_tree(tmp_path / "other", {"SKILL.md": "# skill v2\n", "ref/usage2.md": "usage v2\n"})
    assert si.hash_tree(other) != si.hash_tree(src)


@pytest.mark.parametrize("bad", ["not json", "[]", '{"schema": 2}', "MISSING_NAME"])
def test_invalid_manifest_means_unknown_origin(tmp_path: Path, src: Path, old_src: Path, bad: str) -> None:
    target = tmp_path / "tianshu-mcp"
    assert si.install_skill(old_src, target, package_version="0.0.9").changed
    path = target / si.MANIFEST_NAME
    if bad == "MISSING_NAME":
        data = json.loads(path.read_text())
        del data["name"]
        bad = json.dumps(data)
    path.write_text(bad)
    assert si.inspect_target(target, si.hash_tree(src))[0] == si.TargetState.UNKNOWN


def test_skip_repairs_a_corrupt_manifest(tmp_path: Path, src: Path) -> None:
    target = tmp_path / "tianshu-mcp"
    si.install_skill(src, target, package_version="1.0.0")
    (target / si.MANIFEST_NAME).write_text("{broken")
    result = si.install_skill(src, target, package_version="1.0.0")
    assert result.decision.action == si.Action.SKIP and result.warnings == []
    assert si.read_manifest(target).content_hash == si.hash_tree(src)


def _failing_rename(monkeypatch: pytest.MonkeyPatch, should_fail: Any) -> list[tuple[str, str]]:
    real = os.rename
    calls: list[tuple[str, str]] = []

    def rename(a: Any, b: Any) -> None:
        calls.append((os.fspath(a), os.fspath(b)))
        if should_fail(Path(a), Path(b)):
            raise OSError(errno.EIO, "injected I/O error")
        real(a, b)

    monkeypatch.setattr(si.os, "rename", rename)
    return calls


def test_rollback_when_the_rename_in_fails(tmp_path: Path, src: Path, old_src: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "skills" / "tianshu-mcp"
    si.install_skill(old_src, target, package_version="0.0.9")
    before = snapshot(target)
    calls = _failing_rename(monkeypatch, lambda a, b: ".incoming-" in a.name and b == target)

    result = si.install_skill(src, target, package_version="1.0.0")

    assert result.failed and not result.changed
    assert any(w.startswith("[SKILL_INSTALL_FAILED]") and "injected I/O error" in w for w in result.warnings)
    (out_a, out_b), (in_a, in_b), (back_a, back_b) = calls  # old tree out, new tree in (fails), old tree back
    assert Path(out_a) == target and ".bak-" in out_b
    assert ".incoming-" in in_a and Path(in_b) == target
    assert (back_a, Path(back_b)) == (out_b, target)
    assert snapshot(target) == before  # the old tree is back in place
    assert siblings(target, "bak") == [] and siblings(target, "incoming") == []


def test_failed_rollback_keeps_the_backup_and_says_where(tmp_path: Path, src: Path, old_src: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "skills" / "tianshu-mcp"
    si.install_skill(old_src, target, package_version="0.0.9")
    before = snapshot(target)
    _failing_rename(monkeypatch, lambda a, b: b == target)  # neither the new nor the old tree gets in
    result = si.install_skill(src, target, package_version="1.0.0")
    assert result.failed
    codes = [w.split("]")[0][1:] for w in result.warnings]
    assert codes == [si.SKILL_UPDATED, si.SKILL_ROLLBACK_FAILED, si.SKILL_INSTALL_FAILED]
    [bak] = siblings(target, "bak")
    assert str(bak) in result.warnings[1] and snapshot(bak) == before
    assert not target.exists() and siblings(target, "incoming") == []


def _fake_backups(target: Path, stamps: list[int]) -> list[Path]:
    made = []
    for stamp in stamps:
        made.append(make_tree(target.parent / f".{target.name}.bak-{stamp}", {"SKILL.md": f"bak {stamp}\n"}))
    return made


def test_pruning_to_backup_keep_after_an_overwrite(tmp_path: Path, src: Path, old_src: Path) -> None:
    target = tmp_path / "skills" / "tianshu-mcp"
    si.install_skill(old_src, target, package_version="0.0.9")
    old = _fake_backups(target, [1000, 2000, 3000, 4000, 5000])
    odd_dir = make_tree(target.parent / f".{target.name}.bak-x", {"f": "keep me"})
    odd_file = target.parent / f".{target.name}.bak-9"
    odd_file.write_text("a file, not a backup tree")
    result = si.install_skill(src, target, package_version="1.0.0", backup_keep=3)
    assert result.changed and result.backup is not None
    baks = [p for p in siblings(target, "bak") if p.is_dir() and p.name.rsplit("-", 1)[1].isdigit()]
    assert sorted(baks) == sorted([result.backup, old[4], old[3]])  # the newest three
    assert sorted(result.pruned) == sorted(old[:3])
    assert odd_dir.is_dir() and odd_file.is_file()


def test_no_pruning_with_backup_keep_zero_or_without_overwrite(tmp_path: Path, src: Path, old_src: Path) -> None:
    target = tmp_path / "skills" / "tianshu-mcp"
    old = _fake_backups(target, [1, 2, 3, 4])
    assert si.install_skill(src, target, package_version="1.0.0", backup_keep=1).changed  # a first install
    assert all(p.is_dir() for p in old)
    shutil.rmtree(target)
    si.install_skill(old_src, target, package_version="0.0.9")
    result = si.install_skill(src, target, package_version="1.0.0", backup_keep=0)
    assert result.decision.action == si.Action.OVERWRITE and result.pruned == []
    assert len(siblings(target, "bak")) == 5


def test_stale_incoming_leftovers_are_removed(tmp_path: Path, src: Path) -> None:
    target = tmp_path / "skills" / "tianshu-mcp"
    stale = make_tree(target.parent / f".{target.name}.incoming-1-1", {"SKILL.md": "half"})
    fresh = make_tree(target.parent / f".{target.name}.incoming-2-2", {"SKILL.md": "busy"})
    two_hours_ago = time.time() - 7200
    os.utime(stale, (two_hours_ago, two_hours_ago))
    result = si.install_skill(src, target, package_version="1.0.0")
    assert not stale.exists() and fresh.is_dir()
    assert any(str(stale) in line for line in result.infos)


@pytest.mark.parametrize("how", ["parent_is_a_file", "target_is_unreadable"])
def test_unwritable_target_warns_with_a_code_and_never_raises(tmp_path: Path, src: Path, how: str,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    if how == "parent_is_a_file":  # works as root too, where permission bits do not stop writes
        (tmp_path / "blocker").write_text("a file where the skills directory should be")
        target = tmp_path / "blocker" / "skills" / "tianshu-mcp"
    else:
        target = tmp_path / "skills" / "tianshu-mcp"
        make_tree(target, {"SKILL.md": "x"})
        real = os.walk

        def walk(top: Any, *args: Any, **kwargs: Any) -> Any:
            if Path(top) == target:
                kwargs["onerror"](PermissionError(errno.EACCES, "Permission denied", str(target)))
                return iter(())
            return real(top, *args, **kwargs)

        monkeypatch.setattr(si.os, "walk", walk)
    result = si.install_skill(src, target, package_version="1.0.0")
    assert result.failed and not result.changed
    [warning] = result.warnings
    assert warning.startswith(f"[{si.SKILL_INSTALL_FAILED}]") and str(target) in warning
    assert "Errno" in warning


def test_concurrent_installs_do_not_race(tmp_path: Path, src: Path) -> None:
    target = tmp_path / "skills" / "tianshu-mcp"
    barrier = threading.Barrier(4)
    results: list[si.InstallResult] = []

    def one() -> None:
        barrier.wait()
        results.append(si.install_skill(src, target, package_version="1.0.0"))

    threads = [threading.Thread(target=one) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sorted(r.decision.action.value for r in results) == ["install", "skip", "skip", "skip"]
    assert all(not r.failed and r.warnings == [] for r in results)
    assert si.hash_tree(target) == si.hash_tree(src) and siblings(target, "bak") == []


# --- switches and the hook ---------------------------------------------------------------------
def cfg(**skills: Any) -> ServerConfig:
    return ServerConfig.model_validate({"skills": skills})


def test_switches_mode_and_target(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = {skill_boot.TARGET_ENV: str(tmp_path / "t")}
    assert skill_boot.plan(cfg(), environ=env).enabled
    assert skill_boot.plan(cfg(), no_install_flag=True, environ=env).why_off == "--no-skill-install"
    assert not skill_boot.plan(cfg(), environ={**env, "TIANSHU_MCP_NO_SKILL_INSTALL": "1"}).enabled
    assert skill_boot.plan(cfg(), environ={**env, "TIANSHU_MCP_NO_SKILL_INSTALL": ""}).enabled
    assert skill_boot.plan(cfg(), environ={**env, "TIANSHU_MCP_NO_SKILL_INSTALL": "0"}).enabled
    off = skill_boot.plan(cfg(autoInstall=False), approve_flag=True, environ=env)
    assert not off.enabled and off.why_off == "skills.autoInstall=false"  # the switches outrank approval
    assert skill_boot.plan(cfg(), environ=env).mode == "auto"
    assert skill_boot.plan(cfg(autoInstall="prompt"), environ=env).mode == "prompt"
    assert skill_boot.plan(cfg(autoInstall="prompt"), approve_flag=True, environ=env).mode == "approve"
    assert skill_boot.plan(cfg(), environ={**env, "TIANSHU_MCP_APPROVE_SKILL_UPDATE": "1"}).mode == "approve"
    # target: env > config > default; "~" expanded
    assert skill_boot.plan(cfg(targetDir=str(tmp_path / "c")), environ=env).target == tmp_path / "t"
    assert skill_boot.plan(cfg(targetDir=str(tmp_path / "c")), environ={}).target == tmp_path / "c"
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert skill_boot.plan(cfg(), environ={}).target == tmp_path / "home" / ".rivet" / "skills" / "tianshu-mcp"
    assert skill_boot.plan(cfg(targetDir="~/host/skills/x"), environ={}).target == tmp_path / "home" / "host" / "skills" / "x"
    assert cfg(backupKeep=0).skills.backup_keep == 0
    with pytest.raises(ValueError):
        cfg(autoInstall="sometimes")


def test_source_is_package_relative_never_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tianshu_mcp.skills

    make_tree(tmp_path / "skills" / "tianshu-mcp", {"SKILL.md": "poisoned"})
    monkeypatch.chdir(tmp_path)
    source = skill_boot.skill_source_dir()
    assert source == Path(tianshu_mcp.skills.__file__).resolve().parent / "tianshu-mcp"
    assert (source / "SKILL.md").is_file() and "poisoned" not in (source / "SKILL.md").read_text()


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[tuple[int, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append((record.levelno, record.getMessage()))


@pytest.fixture
def collected() -> Any:
    handler = _Collect()
    logger = logging.getLogger("tianshu_mcp")
    old_level = logger.level
    logger.setLevel(logging.INFO)
    logger.addHandler(handler)
    yield handler
    logger.removeHandler(handler)
    logger.setLevel(old_level)


def test_hook_runs_in_a_thread_and_logs_warnings(tmp_path: Path, collected: _Collect) -> None:
    (tmp_path / "blocker").write_text("x")
    bad = {skill_boot.TARGET_ENV: str(tmp_path / "blocker" / "tianshu-mcp")}
    thread = skill_boot.start_skill_install(cfg(), environ=bad)
    assert thread is not None and thread.daemon
    thread.join(60)
    assert any(level == logging.WARNING and msg.startswith("[SKILL_INSTALL_FAILED]") for level, msg in collected.lines)

    good = {skill_boot.TARGET_ENV: str(tmp_path / "ok" / "tianshu-mcp")}
    thread = skill_boot.start_skill_install(cfg(), environ=good)
    thread.join(60)
    manifest = si.read_manifest(tmp_path / "ok" / "tianshu-mcp")
    assert manifest is not None and manifest.package_version == __version__
    assert manifest.content_hash == si.hash_tree(tmp_path / "ok" / "tianshu-mcp")
    assert manifest.source_dir.startswith(str(skill_boot.skill_source_dir()))

    off = {**good, skill_boot.TARGET_ENV: str(tmp_path / "off" / "tianshu-mcp"), "TIANSHU_MCP_NO_SKILL_INSTALL": "1"}
    assert skill_boot.start_skill_install(cfg(), environ=off) is None
    assert not (tmp_path / "off").exists()
    assert (logging.INFO, "skill self-install is off (TIANSHU_MCP_NO_SKILL_INSTALL=1)") in collected.lines


# --- end to end: the real console script ---------------------------------------------------------
async def _wait_for(predicate: Any, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await anyio.sleep(0.05)


def _server_log(home: Path) -> str:
    path = home / "logs" / "server.log"
    return path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""


def _e2e_home(tmp_path: Path, switch: str = "", locale: str | None = None) -> tuple[Path, Path, dict[str, str]]:
    """A data home (with ``locale`` in its config), the host's skill target under ``tmp_path`` and
    the server env (``TIANSHU_MCP_NO_SKILL_INSTALL=switch``; no Prefect needed)."""
    home, target = tmp_path / "home", tmp_path / "host" / "skills" / "tianshu-mcp"
    home.mkdir()
    if locale:
        (home / "config.json").write_text(json.dumps({"locale": locale}))
    return home, target, {**NO_PREFECT, "TIANSHU_MCP_NO_SKILL_INSTALL": switch, skill_boot.TARGET_ENV: str(target)}


@pytest.mark.anyio
async def test_e2e_background_install_while_tools_list_answers(tmp_path: Path) -> None:
    home, target, env = _e2e_home(tmp_path)
    async with mcp_client(home, env=env) as client:
        tools = (await client.list_tools()).tools
        assert len(tools) == 8
        await _wait_for(lambda: si.read_manifest(target) is not None, 60, "the skill manifest")
    manifest = si.read_manifest(target)
    assert manifest.package_version == __version__
    source = skill_boot.skill_source_dir()
    assert si.hash_tree(target) == manifest.content_hash
    assert manifest.source_dir == f"{source} (en)"
    assert (target / "SKILL.md").read_bytes() == (source / "SKILL.md").read_bytes()
    assert not (target / "SKILL.zh-CN.md").exists()  # one document: the host's language
    assert "skill installed at" in _server_log(home)


@pytest.mark.anyio
async def test_e2e_a_chinese_home_installs_the_chinese_skill_document(tmp_path: Path) -> None:
    home, target, env = _e2e_home(tmp_path, locale="zh-CN")
    async with mcp_client(home, env=env) as client:
        assert len((await client.list_tools()).tools) == 8
        await _wait_for(lambda: si.read_manifest(target) is not None, 60, "the skill manifest")
    source = skill_boot.skill_source_dir()
    assert (target / "SKILL.md").read_bytes() == (source / "SKILL.zh-CN.md").read_bytes()
    assert si.read_manifest(target).source_dir == f"{source} (zh_CN)" and not (target / "SKILL.zh-CN.md").exists()
    # the host's language changes: the zh copy is the recorded one, so it is replaced (auto mode)
    result = si.install_skill(skill_boot.localized_source(source, "en", tmp_path / "r"), target,
                              package_version=__version__)
    assert result.decision.code == si.SKILL_UPDATED and (target / "SKILL.md").read_bytes() == (source / "SKILL.md").read_bytes()


def test_localized_source_keeps_one_document(tmp_path: Path, src: Path) -> None:
    (src / "SKILL.zh-CN.md").write_text("# 中文\n", encoding="utf-8")
    (src / "SKILL.fr.md").write_text("# français\n", encoding="utf-8")
    zh = skill_boot.localized_source(src, "zh_CN", tmp_path / "zh")
    en = skill_boot.localized_source(src, "en", tmp_path / "en")
    assert (zh / "SKILL.md").read_text(encoding="utf-8") == "# 中文\n"
    assert (en / "SKILL.md").read_bytes() == (src / "SKILL.md").read_bytes()
    for tree in (zh, en):
        assert not list(tree.glob("SKILL.*.md")) and sorted(p.name for p in tree.iterdir()) == sorted(
            p.name for p in src.iterdir() if not skill_boot._VARIANT.match(p.name))


@pytest.mark.anyio
async def test_e2e_switch_set_writes_nothing(tmp_path: Path) -> None:
    home, target, env = _e2e_home(tmp_path, switch="1")
    async with mcp_client(home, env=env) as client:
        assert len((await client.list_tools()).tools) == 8
    # the decision is logged before the server answers anything: nothing was started
    assert "skill self-install is off (TIANSHU_MCP_NO_SKILL_INSTALL=1)" in _server_log(home)
    assert not (tmp_path / "host").exists()


@pytest.mark.anyio
async def test_e2e_unwritable_target_only_warns(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (tmp_path / "blocker").write_text("a file where the skill directory's parent should be")
    env = {**NO_PREFECT, "TIANSHU_MCP_NO_SKILL_INSTALL": "", skill_boot.TARGET_ENV: str(tmp_path / "blocker" / "tianshu-mcp")}
    async with mcp_client(home, env=env) as client:
        await _wait_for(lambda: "[SKILL_INSTALL_FAILED]" in _server_log(home), 60, "the install warning")
        assert len((await client.list_tools()).tools) == 8  # still serving
    assert "[WARNING] [SKILL_INSTALL_FAILED]" in _server_log(home)


@contextlib.asynccontextmanager
async def _console(home: Path, env: dict[str, str], *args: str) -> AsyncIterator[Any]:
    """The SDK's stdio client on ``tianshu-mcp <args>`` (the console script a host starts)."""
    from mcp import Client, StdioServerParameters

    params = StdioServerParameters(command=CONSOLE, args=list(args), env={**server_env(home), **env})
    async with Client(params, mode="legacy") as client:
        yield client


@pytest.mark.anyio
async def test_e2e_console_switches_no_skill_install_and_approve_skill_update(tmp_path: Path) -> None:
    """``tianshu-mcp --no-skill-install`` and ``tianshu-mcp --approve-skill-update`` (console/main.py),
    each beside a plain start on the same target, with nothing else set (the env switch is empty)."""
    target = tmp_path / "host" / "skills" / "tianshu-mcp"
    env = {**NO_PREFECT, "TIANSHU_MCP_NO_SKILL_INSTALL": "", skill_boot.TARGET_ENV: str(target)}

    def home(name: str) -> Path:
        (tmp_path / name).mkdir()
        return tmp_path / name

    # --no-skill-install: an absent target stays absent (a plain start installs it: the e2e test above)
    off = home("home-off")
    async with _console(off, env, "--no-skill-install") as client:
        assert len((await client.list_tools()).tools) == 8
    assert "skill self-install is off (--no-skill-install)" in _server_log(off)
    assert not (tmp_path / "host").exists()

    # a hand-made skill of unknown origin: a plain start keeps it (and says how to approve)
    make_tree(target, {"SKILL.md": "# hand-made\n"})
    before = snapshot(target)
    plain = home("home-plain")
    async with _console(plain, env) as client:
        assert len((await client.list_tools()).tools) == 8
        await _wait_for(lambda: f"[{si.SKILL_UNKNOWN_SOURCE}]" in _server_log(plain), 60, "the unknown-origin warning")
    assert "--approve-skill-update" in _server_log(plain)
    assert snapshot(target) == before and si.read_manifest(target) is None and siblings(target, "bak") == []

    # both flags: the off switch outranks the approval
    both = home("home-both")
    async with _console(both, env, "--no-skill-install", "--approve-skill-update") as client:
        assert len((await client.list_tools()).tools) == 8
    assert "skill self-install is off (--no-skill-install)" in _server_log(both)
    assert snapshot(target) == before and siblings(target, "bak") == []

    # --approve-skill-update: the unknown tree is backed up and replaced by the package's skill
    approve = home("home-approve")
    async with _console(approve, env, "--approve-skill-update") as client:
        assert len((await client.list_tools()).tools) == 8
        await _wait_for(lambda: "skill installed at" in _server_log(approve), 60, "the approved install")
    log_text = _server_log(approve)
    assert f"[{si.SKILL_UPDATED}]" in log_text and "the update is approved" in log_text
    source = skill_boot.skill_source_dir()
    assert (target / "SKILL.md").read_bytes() == (source / "SKILL.md").read_bytes()
    manifest = si.read_manifest(target)
    assert manifest is not None and manifest.content_hash == si.hash_tree(target)
    (backup,) = siblings(target, "bak")
    assert snapshot(backup) == before


@pytest.mark.anyio
async def test_e2e_handshake_is_answered_while_the_install_waits_for_its_lock(tmp_path: Path) -> None:
    """Another process holds the install's file lock beside the target: ``initialize`` and
    ``tools/list`` are answered while the background install waits; once the lock is released the
    install completes (its manifest is stamped after the release)."""
    from datetime import datetime

    from filelock import FileLock

    home, target, env = _e2e_home(tmp_path)
    target.parent.mkdir(parents=True)
    holder = FileLock(str(target.parent / f".{target.name}.install-lock"))  # core/skill_install.py's lock path
    holder.acquire(timeout=5)
    try:
        async with mcp_client(home, env=env) as client:  # initialize answered
            assert len((await client.list_tools()).tools) == 8  # tools/list answered
            # answered while the install cannot have run (we hold its lock) and has not given up
            log_text = _server_log(home)
            assert not target.exists() and "skill installed" not in log_text and si.SKILL_INSTALL_BUSY not in log_text
            released = time.time()
            holder.release()
            await _wait_for(lambda: "skill installed at" in _server_log(home), 60, "the install after the release")
            assert len((await client.list_tools()).tools) == 8
    finally:
        if holder.is_locked:
            holder.release()
    manifest = si.read_manifest(target)
    assert manifest is not None and si.hash_tree(target) == manifest.content_hash
    stamped = datetime.fromisoformat(manifest.installed_at.replace("Z", "+00:00")).timestamp()
    assert stamped >= released - 0.01, (manifest.installed_at, released)
    assert si.SKILL_INSTALL_BUSY not in _server_log(home)

def test_a_lock_that_cannot_be_created_fails_at_once_not_after_the_lock_timeout(tmp_path: Path, src: Path,
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """/proc/<x> as target (seen): the lock file cannot be created; that is the target's error."""
    real_open = open

    def refusing_open(path: Any, *args: Any, **kwargs: Any) -> Any:
        if str(path).endswith(".install-lock"):
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr("builtins.open", refusing_open)
    started = time.monotonic()
    result = si.install_skill(src, tmp_path / "host" / "tianshu-mcp", package_version="1", lock_timeout_s=30)
    assert result.failed and time.monotonic() - started < 20
    assert [w for w in result.warnings if w.startswith(f"[{si.SKILL_INSTALL_FAILED}]") and "Permission denied" in w]
    assert not (tmp_path / "host" / "tianshu-mcp").exists()


def test_a_relative_target_is_refused_not_resolved_against_the_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   collected: _Collect) -> None:
    monkeypatch.chdir(tmp_path)
    p = skill_boot.plan(ServerConfig(), environ={skill_boot.TARGET_ENV: "relskill"})
    assert not p.enabled and "not an absolute path" in p.why_off
    assert skill_boot.start_skill_install(ServerConfig(), environ={skill_boot.TARGET_ENV: "relskill"}) is None
    assert any(level == logging.WARNING and msg.startswith(f"[{si.SKILL_INSTALL_FAILED}]") and "relskill" in msg
               for level, msg in collected.lines)
    assert not (tmp_path / "relskill").exists()
    assert skill_boot.plan(ServerConfig(), environ={skill_boot.TARGET_ENV: "~/skills/x"}).enabled  # ~ is absolute
