"""acceptance.git: baseline capture, change analysis, git-diff-check, signals (20-acceptance §4).

Real git repositories in temp dirs; no mocks.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import pytest

from tianshu_mcp.acceptance.git import (
    Baseline,
    analyze_changes,
    capture_baseline,
    git_diff_check,
    run_git,
    scan_signals,
)


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=repo, check=True, capture_output=True, text=True, stdin=subprocess.DEVNULL
    ).stdout


def make_repo(path: Path, files: dict[str, str] | None = None, commit: bool = True) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q")
    git(path, "config", "user.name", "Test")
    git(path, "config", "user.email", "test@example.com")
    git(path, "config", "commit.gpgsign", "false")
    for rel, text in (files or {}).items():
        p = path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
    if commit and files:
        git(path, "add", "-A")
        git(path, "commit", "-qm", "init")
    return path


def sha1(data: bytes) -> str:
    return hashlib.sha1(data).hexdigest()  # noqa: S324


# --- baseline -----------------------------------------------------------------------------------


def test_baseline_non_repo(tmp_path: Path) -> None:
    b = capture_baseline(tmp_path)
    assert b.is_repo is False and b.head is None and b.dirty is False
    assert b.dirty_files == [] and b.pre_dirty_hashes == {}
    assert "Not a git repository" in b.message


def test_baseline_clean(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", {"a.txt": "a\n"})
    b = capture_baseline(repo)
    head = git(repo, "rev-parse", "HEAD").strip()
    assert b.is_repo and b.head == head and not b.dirty
    assert b.message == f"Baseline HEAD={head}, working tree clean."
    assert b.captured_at.endswith("Z")


def test_baseline_dirty_hashes(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", {"a.txt": "a\n", "b.txt": "b\n", "gone.txt": "g\n"})
    (repo / "a.txt").write_text("a2\n")
    (repo / "new dir").mkdir()
    (repo / "new dir" / "ü n.txt").write_text("new\n")
    (repo / "staged.txt").write_text("s\n")
    git(repo, "add", "staged.txt")
    (repo / "gone.txt").unlink()
    b = capture_baseline(repo)
    assert b.dirty
    assert sorted(b.pre_existing_changed) == ["a.txt", "gone.txt", "staged.txt"]
    assert b.pre_existing_untracked == ["new dir/ü n.txt"]  # not C-quoted
    assert b.pre_dirty_hashes["a.txt"] == sha1(b"a2\n")
    assert b.pre_dirty_hashes["new dir/ü n.txt"] == sha1(b"new\n")
    assert b.pre_untracked_hashes == {"new dir/ü n.txt": sha1(b"new\n")}
    assert b.pre_dirty_hashes["gone.txt"] == "deleted"
    assert sorted(b.dirty_files) == sorted([" M a.txt", " D gone.txt", "A  staged.txt", "?? new dir/ü n.txt"])
    assert "working tree dirty (4 entries)" in b.message


def test_baseline_unborn_head(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r")
    (repo / "x.txt").write_text("x\n")
    b = capture_baseline(repo)
    assert b.is_repo and b.head is None and b.dirty
    assert b.pre_existing_untracked == ["x.txt"]
    assert b.message.startswith("No HEAD (empty repository).")


def test_baseline_json_round_trip(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", {"a.txt": "a\n"})
    (repo / "a.txt").write_text("changed\n")
    b = capture_baseline(repo)
    data = json.loads(json.dumps(b.model_dump(by_alias=True)))
    assert set(data) >= {
        "isRepo", "head", "dirty", "dirtyFiles", "preExistingChanged", "preExistingUntracked",
        "preDirtyHashes", "preUntrackedHashes", "capturedAt", "message",
    }
    assert Baseline.model_validate(data) == b
    # a baseline.json written by another producer without the port-only field still loads
    data.pop("untrackedHashTruncated")
    assert Baseline.model_validate(data).untracked_hash_truncated == 0


def test_baseline_large_file_not_hashed(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", {"a.txt": "a\n"})
    (repo / "big.bin").write_bytes(b"\0" * (4 * 1024 * 1024 + 1))
    b = capture_baseline(repo)
    assert "big.bin" in b.pre_existing_untracked and "big.bin" not in b.pre_dirty_hashes


def test_capture_never_touches_the_index(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", {"a.txt": "a\n"})
    (repo / "a.txt").write_text("b\n")
    index = repo / ".git" / "index"
    before = (index.read_bytes(), index.stat().st_mtime_ns)
    b = capture_baseline(repo)
    analyze_changes(b, repo, "")
    git_diff_check(repo, b)
    assert (index.read_bytes(), index.stat().st_mtime_ns) == before
    assert not (repo / ".git" / "index.lock").exists()


# --- analysis -----------------------------------------------------------------------------------


def test_analysis_non_repo(tmp_path: Path) -> None:
    a = analyze_changes(capture_baseline(tmp_path), tmp_path, "")
    assert a.changed_files == [] and not a.has_changes
    assert a.notes == ["The project is not a git repository; no change list/diffstat analysis was done."]


def test_analysis_no_changes(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", {"a.py": "x = 1\n"})
    b = capture_baseline(repo)
    a = analyze_changes(b, repo, "")
    assert not a.has_changes and a.diffstat.total_add == 0 and a.notes == []


def test_analysis_modified_file(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", {"a.py": "x = 1\ny = 2\n"})
    b = capture_baseline(repo)
    (repo / "a.py").write_text("x = 1\ny = 3\nz = 4\n")
    a = analyze_changes(b, repo, "")
    assert a.changed_files == ["a.py"] and a.untracked_files == []
    assert a.diffstat.total_add == 2 and a.diffstat.total_del == 1
    assert a.to_json()["diffstat"]["perFile"] == [{"file": "a.py", "add": 2, "del": 1}]
    assert a.has_changes


def test_analysis_new_untracked_file_counts_as_change(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", {"a.py": "x = 1\n"})
    b = capture_baseline(repo)
    (repo / "pkg").mkdir()
    (repo / "pkg" / "new.py").write_text("def f():\n    return 1\n")
    a = analyze_changes(b, repo, "")
    assert a.changed_files == [] and a.untracked_files == ["pkg/new.py"]
    assert a.diffstat.total_add == 3  # len("…\n".split("\n")), as the original counts
    assert a.has_changes


def test_analysis_excludes_unchanged_pre_existing_dirty(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", {"dirty.py": "a\n", "other.py": "o\n", "gone.py": "g\n"})
    (repo / "dirty.py").write_text("a\nuser edit\n")
    (repo / "scratch.txt").write_text("user notes\n")
    (repo / "gone.py").unlink()
    b = capture_baseline(repo)
    a = analyze_changes(b, repo, "")
    assert not a.has_changes, a.to_json()
    assert any("already had 2 tracked dirty file(s) + 1 untracked" in n for n in a.notes)
    # now the agent edits the pre-dirty file and the pre-existing untracked file
    (repo / "dirty.py").write_text("a\nuser edit\nagent edit\n")
    (repo / "scratch.txt").write_text("user notes\nagent\n")
    a2 = analyze_changes(b, repo, "")
    assert a2.changed_files == ["dirty.py"] and a2.untracked_files == ["scratch.txt"]
    assert any("scratch.txt existed before work started" in n for n in a2.notes)


def test_analysis_paths_with_spaces_and_non_ascii(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", {"my file.txt": "a\n", "中文 目录/文件.md": "x\n", 'q"uote.txt': "q\n"})
    b = capture_baseline(repo)
    (repo / "my file.txt").write_text("a\nb \n")
    (repo / "中文 目录" / "文件.md").write_text("x\ny\n")
    (repo / 'q"uote.txt').write_text("q\n// TODO fix\n")
    (repo / "新 文件.txt").write_text("hello\n")
    a = analyze_changes(b, repo, "")
    assert sorted(a.changed_files) == sorted(["my file.txt", "中文 目录/文件.md", 'q"uote.txt'])
    assert a.untracked_files == ["新 文件.txt"]
    assert {r.file: r.add for r in a.diffstat.per_file} == {
        "my file.txt": 1, "中文 目录/文件.md": 1, 'q"uote.txt': 1, "新 文件.txt": 2
    }
    assert a.signals.todo == 1  # added line attributed through a C-quoted header


def test_analysis_agent_commits_are_merged(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", {"a.py": "a\n"})
    b = capture_baseline(repo)
    (repo / "b.py").write_text("b\nconsole.log(1)\n")
    git(repo, "add", "b.py")
    git(repo, "commit", "-qm", "agent")
    (repo / "a.py").write_text("a\nmore\n")
    a = analyze_changes(b, repo, "")
    assert sorted(a.changed_files) == ["a.py", "b.py"]
    assert a.diffstat.total_add == 3 and a.signals.console_debug == 1
    assert any("created git commit" in n for n in a.notes)


def test_analysis_unborn_baseline_then_commit(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r")
    b = capture_baseline(repo)
    (repo / "main.py").write_text("print('hi')\n")
    git(repo, "add", "main.py")
    git(repo, "commit", "-qm", "first")
    a = analyze_changes(b, repo, "")
    assert a.changed_files == ["main.py"] and a.has_changes
    r = git_diff_check(repo, b)
    assert r["passed"] and r["cmd"] == "git diff --check"


def test_analysis_staged_new_file_in_unborn_repo(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r")
    b = capture_baseline(repo)
    (repo / "s.py").write_text("s\n")
    git(repo, "add", "s.py")
    a = analyze_changes(b, repo, "")
    assert a.changed_files == ["s.py"]


def test_analysis_deletion_binary_lockfile_bigfile(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", {"old.py": "1\n2\n3\n", "yarn.lock": "v1\n"})
    b = capture_baseline(repo)
    (repo / "old.py").unlink()
    (repo / "yarn.lock").write_text("v2\n")
    (repo / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 64)
    (repo / "big.txt").write_text("".join(f"line {i}\n" for i in range(600)))
    a = analyze_changes(b, repo, "")
    rows = {r.file: r for r in a.diffstat.per_file}
    assert rows["old.py"].del_ == 3 and "old.py" in a.changed_files
    assert rows["logo.png"].binary is True and rows["logo.png"].add == 0
    assert a.big_file_changes == ["big.txt (+601 -0)"]
    assert a.warnings == ["Lockfile modified: yarn.lock (confirm the dependency change is intended)"]
    per_file = {r["file"]: r for r in a.to_json()["diffstat"]["perFile"]}
    assert per_file["logo.png"] == {"file": "logo.png", "add": 0, "del": 0, "binary": True}
    assert "binary" not in per_file["old.py"]


def test_analysis_ignores_tool_caches_and_excluded(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", {"a.py": "a\n"})
    b = capture_baseline(repo)
    (repo / "__pycache__").mkdir()
    (repo / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"\0\0")
    (repo / ".pytest_cache" / "v").mkdir(parents=True)
    (repo / ".pytest_cache" / "v" / "nodeids").write_text("[]")
    (repo / "coverage.xml").write_text("<x/>")
    a = analyze_changes(b, repo, "", exclude_untracked={"coverage.xml"})
    assert not a.has_changes, a.to_json()
    assert any("tool-cache" in n for n in a.notes)
    assert any("created by the acceptance checks" in n for n in a.notes)


def test_analysis_extension_hint(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", {"a.txt": "a\n"})
    b = capture_baseline(repo)
    (repo / "a.txt").write_text("b\n")
    a = analyze_changes(b, repo, "Write a Python helper")
    assert any(n.startswith("Task mentions file type") and ".py" in n for n in a.notes)
    (repo / "h.py").write_text("x\n")
    a2 = analyze_changes(b, repo, "Write a Python helper")
    assert not any(n.startswith("Task mentions file type") for n in a2.notes)


def test_analysis_never_modifies_worktree(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", {"a.py": "a\n"})
    b = capture_baseline(repo)
    (repo / "a.py").write_text("a\nb\n")
    (repo / "n.py").write_text("n\n")
    status = git(repo, "status", "--porcelain")
    analyze_changes(b, repo, "")
    assert git(repo, "status", "--porcelain") == status
    assert git(repo, "stash", "list") == ""


# --- git-diff-check -------------------------------------------------------------------------------


def test_git_diff_check_trailing_whitespace(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", {"a.py": "x = 1\n"})
    b = capture_baseline(repo)
    ok = git_diff_check(repo, b)
    assert ok["passed"] and ok["exitCode"] == 0 and ok["name"] == "git-diff-check"
    assert ok["cmd"] == f"git diff --check (base={b.head[:7]})"  # type: ignore[index]
    (repo / "a.py").write_text("x = 1   \n")
    bad = git_diff_check(repo, b)
    assert not bad["passed"] and bad["exitCode"] not in (0, None)
    assert "a.py:1: trailing whitespace" in bad["outputTail"]
    assert bad["timeout"] is False and bad["aborted"] is False
    assert list(bad)[:7] == ["name", "cmd", "passed", "durationMs", "exitCode", "outputTail", "timeout"]


def test_git_diff_check_catches_committed_whitespace(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", {"a.py": "x = 1\n"})
    b = capture_baseline(repo)
    (repo / "b.py").write_text("y = 2 \n")
    git(repo, "add", "b.py")
    git(repo, "commit", "-qm", "agent")
    r = git_diff_check(repo, b)
    assert not r["passed"] and "b.py:1: trailing whitespace" in r["outputTail"]


def test_git_diff_check_non_repo_is_skipped(tmp_path: Path) -> None:
    r = git_diff_check(tmp_path, capture_baseline(tmp_path))
    assert r["skipped"] is True and r["passed"] is True and r["exitCode"] is None
    assert r["cmd"] == "git diff --check" and "not a git repository" in r["reason"]


def test_run_git_timeout_and_spawn_error(tmp_path: Path) -> None:
    r = run_git(["--version"], tmp_path)
    assert r.ok and r.stdout.startswith("git version")
    r2 = run_git(["rev-parse", "HEAD"], tmp_path / "missing-dir")
    assert r2.status is None and "[spawn-error]" in r2.stderr


# --- signals --------------------------------------------------------------------------------------


def test_scan_signals() -> None:
    s = scan_signals(
        [
            "x = 1  # TODO: later",
            "fixme: lower case counts",
            "console.log('x')",
            "debugger;",
            'api_key = "abcdef123456"',
            'const blob = "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVoxMjM0NTY3ODkw"; // long literal',
            "// a",
            "// b",
            "// c",
            "// d",
            "code()",
            "/* start",
            "inside",
            "end */",
            "# one",
            "# two",
        ]
    )
    assert s.todo == 2
    assert s.console_debug == 2
    assert s.secret_like == 2
    # "// a..d" (+ the long-literal line starts with "const", not a comment) → 1; block of 3 → 1;
    # "end */" is a comment line, then "# one", "# two" continue the run → still the same run
    assert s.commented_block == 2


@pytest.mark.parametrize("line", ["pwd: 'short'", "token = x", "password = os.environ['PW']"])
def test_scan_signals_no_false_secret(line: str) -> None:
    assert scan_signals([line]).secret_like == 0
