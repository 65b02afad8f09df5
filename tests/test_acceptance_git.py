"""acceptance.git: baseline capture, change analysis, git-diff-check, signals (docs/acceptance.md §4).

Real git repositories in temp dirs; no mocks.
"""

from __future__ import annotations

import os

import hashlib
import json
import subprocess
import time
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


def test_baseline_large_file_fingerprinted_by_size_and_mtime(tmp_path: Path) -> None:
    # port (docs/robustness.md §10): the original left files over 4 MiB unhashed, so a no-op agent was
    # credited with every big pre-existing file; they are fingerprinted by size and mtime instead
    repo = make_repo(tmp_path / "r", {"a.txt": "a\n"})
    (repo / "big.bin").write_bytes(b"\0" * (4 * 1024 * 1024 + 1))
    b = capture_baseline(repo)
    st = (repo / "big.bin").stat()
    assert b.pre_dirty_hashes["big.bin"] == f"stat:{st.st_size}:{st.st_mtime_ns}"


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
    # the report says that dirty.py's counted diff includes the edit made before work (a tester
    # read "attributes only net changes" and found the previous task's fix in the next one's diff)
    assert next(r.add for r in a2.diffstat.per_file if r.file == "dirty.py") == 2  # "user edit" counted too
    assert any(n.startswith("1 tracked file(s) already modified before work started were changed again (dirty.py)")
               for n in a2.notes), a2.notes


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


# --- change attribution (docs/acceptance.md §8.6) -------------------------------------------------


def test_analysis_pre_dirty_file_changed_again_is_counted_unchanged_one_excluded(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", {"keep.py": "k\n", "edit.py": "e\n"})
    (repo / "keep.py").write_text("k\nuser\n")
    (repo / "edit.py").write_text("e\nuser\n")
    b = capture_baseline(repo)
    (repo / "edit.py").write_text("e\nuser\nagent\n")
    a = analyze_changes(b, repo, "")
    assert a.changed_files == ["edit.py"]  # keep.py is still exactly as the user left it
    assert a.diffstat.per_file[0].add == 2  # line-level attribution is relative to HEAD (known limitation)


def test_analysis_staged_rename_is_reported_as_rename(tmp_path: Path) -> None:
    body = "".join(f"line {i}\n" for i in range(20))
    repo = make_repo(tmp_path / "r", {"src/old name.py": body})
    b = capture_baseline(repo)
    git(repo, "mv", "src/old name.py", "src/新 名.py")
    (repo / "src" / "新 名.py").write_text(body + "# TODO more\n")
    a = analyze_changes(b, repo, "")
    assert a.changed_files == ["src/新 名.py"] and a.untracked_files == []
    assert [r.model_dump(by_alias=True) for r in a.renames] == [
        {"from": "src/old name.py", "to": "src/新 名.py", "similarity": 92}
    ]
    assert a.to_json()["diffstat"] == {"totalAdd": 1, "totalDel": 0, "perFile": [{"file": "src/新 名.py", "add": 1, "del": 0}]}
    assert a.signals.todo == 1  # only the genuinely added line is scanned
    assert a.to_json()["renames"] == [{"from": "src/old name.py", "to": "src/新 名.py", "similarity": 92}]


def test_analysis_committed_pure_rename_keeps_a_zero_row(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", {"a.txt": "1\n2\n3\n"})
    b = capture_baseline(repo)
    git(repo, "mv", "a.txt", "b.txt")
    git(repo, "commit", "-qm", "rename")
    a = analyze_changes(b, repo, "")
    assert a.changed_files == ["b.txt"] and a.has_changes
    assert a.renames[0].similarity == 100
    assert a.to_json()["diffstat"]["perFile"] == [{"file": "b.txt", "add": 0, "del": 0}]


def test_analysis_unstaged_move_is_paired_by_content(tmp_path: Path) -> None:
    body = "".join(f"value_{i} = {i}\n" for i in range(30))
    repo = make_repo(tmp_path / "r", {"same.py": "x = 1\ny = 2\n", "edited.py": body, "logo.png": "\x89PNG\0\0\0"})
    b = capture_baseline(repo)
    (repo / "same.py").rename(repo / "moved.py")
    (repo / "edited.py").unlink()
    (repo / "pkg").mkdir()
    (repo / "pkg" / "edited.py").write_text(body.replace("value_3 = 3\n", "value_3 = 33\n"))
    (repo / "logo.png").rename(repo / "pkg" / "logo.png")
    (repo / "brand_new.py").write_text("print('x')\n")
    a = analyze_changes(b, repo, "")
    ren = {r.to: (r.from_, r.similarity) for r in a.renames}
    assert ren["moved.py"] == ("same.py", 100)
    assert ren["pkg/logo.png"] == ("logo.png", 100)
    assert ren["pkg/edited.py"][0] == "edited.py" and 90 <= ren["pkg/edited.py"][1] < 100
    assert sorted(a.changed_files) == ["moved.py", "pkg/edited.py", "pkg/logo.png"]
    assert a.untracked_files == ["brand_new.py"]
    rows = {r["file"]: r for r in a.to_json()["diffstat"]["perFile"]}
    assert rows["pkg/edited.py"] == {"file": "pkg/edited.py", "add": 1, "del": 1}
    assert rows["pkg/logo.png"]["binary"] is True
    assert "same.py" not in rows and "edited.py" not in rows
    assert any("not recorded by git were detected by content" in n for n in a.notes)


def test_analysis_binary_changes_are_flagged(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", {"a.txt": "a\n"})
    (repo / "data.dat").write_bytes(b"\0\1\2\3" * 50)
    git(repo, "add", "data.dat")
    git(repo, "commit", "-qm", "bin")
    b = capture_baseline(repo)
    (repo / "data.dat").write_bytes(b"\0\7\6\5" * 60)
    (repo / "new.dat").write_bytes(b"\0" * 100)
    a = analyze_changes(b, repo, "")
    rows = {r["file"]: r for r in a.to_json()["diffstat"]["perFile"]}
    assert rows["data.dat"] == {"file": "data.dat", "add": 0, "del": 0, "binary": True}
    assert rows["new.dat"] == {"file": "new.dat", "add": 0, "del": 0, "binary": True}


def test_analysis_untracked_directories_listed_file_by_file(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", {"a.txt": "a\n"})
    b = capture_baseline(repo)
    (repo / "new pkg" / "sub dir").mkdir(parents=True)
    (repo / "new pkg" / "__init__.py").write_text("")
    (repo / "new pkg" / "sub dir" / "ü.py").write_text("x = 1\n")
    (repo / "new pkg" / "sub dir" / 'we"ird\tname.txt').write_text("w\n")
    a = analyze_changes(b, repo, "")
    assert sorted(a.untracked_files) == sorted(
        ["new pkg/__init__.py", "new pkg/sub dir/ü.py", 'new pkg/sub dir/we"ird\tname.txt']
    )


def test_analysis_tracked_paths_with_tab_and_backslash(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", {"t\tab.py": "a\n", "back\\slash.py": "b\n"})
    b = capture_baseline(repo)
    (repo / "t\tab.py").write_text("a\n# TODO x\n")
    (repo / "back\\slash.py").write_text("b\nconsole.log(1)\n")
    a = analyze_changes(b, repo, "")
    assert sorted(a.changed_files) == sorted(["t\tab.py", "back\\slash.py"])
    assert a.signals.todo == 1 and a.signals.console_debug == 1  # attributed through C-quoted headers


def test_analysis_detached_head(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", {"a.py": "a\n"})
    git(repo, "checkout", "-q", "--detach")
    b = capture_baseline(repo)
    assert b.head == git(repo, "rev-parse", "HEAD").strip()
    (repo / "b.py").write_text("b\n")
    git(repo, "add", "b.py")
    git(repo, "commit", "-qm", "detached work")
    (repo / "a.py").write_text("a\nmore\n")
    a = analyze_changes(b, repo, "")
    assert sorted(a.changed_files) == ["a.py", "b.py"] and a.diffstat.total_add == 2
    assert any(n.startswith("HEAD is detached") for n in a.notes)
    assert git_diff_check(repo, b)["passed"]


def test_analysis_commit_reverted_in_worktree_is_not_counted(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", {"a.py": "a\n"})
    b = capture_baseline(repo)
    (repo / "a.py").write_text("a\nb\n")
    git(repo, "commit", "-qam", "add b")
    (repo / "a.py").write_text("a\n")
    a = analyze_changes(b, repo, "")
    assert a.changed_files == [] and a.diffstat.total_add == 0  # net change since the baseline is zero


def test_analysis_unborn_head_untracked_and_staged(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r")
    (repo / "pre.txt").write_text("user\n")
    b = capture_baseline(repo)
    assert b.head is None
    (repo / "new.py").write_text("breakpoint()\n")
    (repo / "staged.py").write_text("s\n")
    git(repo, "add", "staged.py")
    a = analyze_changes(b, repo, "")
    assert a.changed_files == ["staged.py"] and a.untracked_files == ["new.py"]
    assert a.signals.debug_leftover == 1
    assert git_diff_check(repo, b)["passed"]


def _make_submodule_repo(tmp_path: Path) -> tuple[Path, Path]:
    sub = make_repo(tmp_path / "sub", {"s.txt": "s\n"})
    repo = make_repo(tmp_path / "r", {"a.txt": "a\n"})
    git(repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(sub), "libs/sm")
    git(repo, "commit", "-qm", "add submodule")
    # the submodule's clone commits too: its own identity (a clean HOME has no global one)
    git(repo / "libs" / "sm", "config", "user.name", "Test")
    git(repo / "libs" / "sm", "config", "user.email", "test@example.com")
    return repo, sub


def test_analysis_submodule_reported_not_descended(tmp_path: Path) -> None:
    repo, _sub = _make_submodule_repo(tmp_path)
    b = capture_baseline(repo)
    sm = repo / "libs" / "sm"
    before = git(sm, "rev-parse", "HEAD").strip()
    (sm / "t.txt").write_text("TODO inside the submodule\n")
    git(sm, "add", "t.txt")
    git(sm, "commit", "-qm", "t")
    (sm / "dirty.txt").write_text("console.log(1)\n")  # untracked content inside is never analysed
    after = git(sm, "rev-parse", "HEAD").strip()
    a = analyze_changes(b, repo, "")
    assert a.to_json()["submodules"] == [{"path": "libs/sm", "before": before, "after": after}]
    assert a.changed_files == ["libs/sm"] and a.untracked_files == []
    assert a.diffstat.per_file == [] and a.signals.todo == 0 and a.signals.console_debug == 0
    assert a.has_changes
    assert any("Submodules / embedded repositories changed" in n and "libs/sm" in n for n in a.notes)


def test_analysis_dirty_submodule_content_alone_is_no_change(tmp_path: Path) -> None:
    repo, _sub = _make_submodule_repo(tmp_path)
    b = capture_baseline(repo)
    (repo / "libs" / "sm" / "s.txt").write_text("changed inside\n")
    a = analyze_changes(b, repo, "")
    assert not a.has_changes and a.submodules == []


def test_analysis_submodule_moved_before_work_is_excluded_when_unchanged(tmp_path: Path) -> None:
    repo, _sub = _make_submodule_repo(tmp_path)
    sm = repo / "libs" / "sm"
    (sm / "u.txt").write_text("u\n")
    git(sm, "add", "u.txt")
    git(sm, "commit", "-qm", "user moved it")
    b = capture_baseline(repo)
    assert b.pre_dirty_hashes["libs/sm"].startswith("gitlink:")
    a = analyze_changes(b, repo, "")
    assert not a.has_changes, a.to_json()


def test_analysis_embedded_repository_reported(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", {"a.txt": "a\n"})
    b = capture_baseline(repo)
    inner = make_repo(repo / "vendor" / "inner", {"x.py": "x = 1  # TODO\n"})
    a = analyze_changes(b, repo, "")
    head = git(inner, "rev-parse", "HEAD").strip()
    assert a.to_json()["submodules"] == [{"path": "vendor/inner", "before": None, "after": head}]
    assert a.untracked_files == [] and a.signals.todo == 0 and a.has_changes
    assert any("embedded repository" in n for n in a.notes)


def test_analysis_signals_and_tampering_from_a_real_repo(tmp_path: Path) -> None:
    repo = make_repo(
        tmp_path / "r",
        {
            "calc.py": "def add(a, b):\n    return a + b\n",
            "tests/test_calc.py": (
                "from calc import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n\n\n"
                "def test_add_zero():\n    assert add(0, 0) == 0\n    assert add(0, 1) == 1\n"
            ),
            "tests/test_old.py": "def test_old():\n    assert True\n",
            "scripts/check.sh": "pytest -q\n",
            ".tianshu-mcp/acceptance.json": '{"checks": [{"name": "check", "cmd": "bash scripts/check.sh"}]}\n',
        },
    )
    b = capture_baseline(repo)
    (repo / "tests" / "test_calc.py").write_text(
        "import pytest\nfrom calc import add\n\n\n@pytest.mark.skip(reason='later')\ndef test_add():\n    assert add(1, 2) == 3\n\n\n"
        "def test_add_zero():\n    assert add(0, 0) == 0\n"
    )
    (repo / "tests" / "test_old.py").unlink()
    (repo / "scripts" / "check.sh").write_text("exit 0\n")
    (repo / ".tianshu-mcp" / "acceptance.json").write_text('{"checks": []}\n')
    (repo / "calc.py").write_text("def add(a, b):\n    print(a, b)\n    return a + b\n")
    a = analyze_changes(b, repo, "", check_argvs=[["bash", "scripts/check.sh"], [str(repo / "scripts" / "check.sh")]])
    s = a.to_json()["signals"]
    assert s["skippedOrOnlyTests"] == 1
    assert s["deletedTests"] == 1  # tests/test_old.py deleted
    assert s["weakenedTests"] == 1  # "assert add(0, 1) == 1" removed without replacement
    assert s["acceptanceTampering"] == 2  # the check script and acceptance.json
    assert s["debugLeftover"] == 1  # print( in calc.py
    tampering = a.to_json()["tampering"]
    assert {(t["kind"], t["file"]) for t in tampering} == {
        ("skippedOrOnlyTests", "tests/test_calc.py"),
        ("deletedTests", "tests/test_old.py"),
        ("weakenedTests", "tests/test_calc.py"),
        ("acceptanceTampering", "scripts/check.sh"),
        ("acceptanceTampering", ".tianshu-mcp/acceptance.json"),
    }
    assert all(set(t) == {"kind", "file", "detail"} for t in tampering)


def test_analysis_project_in_subdirectory_resolves_check_paths(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", {"app/run_checks.sh": "pytest\n", "run_checks.sh": "x\n"})
    b = capture_baseline(repo / "app")
    (repo / "app" / "run_checks.sh").write_text("true\n")
    (repo / "run_checks.sh").write_text("y\n")
    a = analyze_changes(b, repo / "app", "", check_argvs=[["sh", "run_checks.sh"]])
    assert [(t.kind, t.file) for t in a.tampering] == [("acceptanceTampering", "app/run_checks.sh")]


def test_analysis_json_has_new_fields_when_empty(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", {"a.txt": "a\n"})
    data = analyze_changes(capture_baseline(repo), repo, "").to_json()
    assert list(data) == [
        "changedFiles", "untrackedFiles", "diffstat", "signals", "bigFileChanges", "warnings", "notes",
        "renames", "submodules", "tampering", "outsideProject",
    ]
    assert data["renames"] == [] and data["submodules"] == [] and data["tampering"] == []
    assert data["outsideProject"] == []


def test_git_diff_check_ignores_old_whitespace_in_a_renamed_file(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", {"a.py": "x = 1   \ny = 2\nz = 3\n"})
    b = capture_baseline(repo)
    git(repo, "mv", "a.py", "b.py")
    assert git_diff_check(repo, b)["passed"]  # the trailing blanks predate the task
    (repo / "b.py").write_text("x = 1   \ny = 2\nz = 3\nw = 4 \n")
    bad = git_diff_check(repo, b)
    assert not bad["passed"] and "b.py:4: trailing whitespace" in bad["outputTail"]


def test_analysis_pre_existing_untracked_file_only_staged_is_not_a_change(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", {"a.txt": "a\n"})
    (repo / "notes.txt").write_text("user notes\n")
    (repo / "draft.txt").write_text("draft\n")
    b = capture_baseline(repo)
    git(repo, "add", "notes.txt", "draft.txt")
    (repo / "draft.txt").write_text("draft\nagent\n")
    a = analyze_changes(b, repo, "")
    assert a.changed_files == ["draft.txt"] and a.untracked_files == []


def test_a_merge_in_progress_belongs_to_the_baseline(tmp_path: Path) -> None:
    # pins a finding: an unmerged file (UU) was left out of the baseline and blamed on the agent
    import subprocess

    from tianshu_mcp.acceptance.git import analyze_changes, capture_baseline

    repo = tmp_path / "r"
    repo.mkdir()

    def g(*args: str) -> None:
        subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, stdin=subprocess.DEVNULL)

    g("init", "-q", "-b", "main")
    g("config", "user.email", "t@example.invalid")
    g("config", "user.name", "t")
    (repo / "f.txt").write_text("base\n")
    g("add", "-A")
    g("commit", "-qm", "base")
    g("checkout", "-qb", "other")
    (repo / "f.txt").write_text("other\n")
    g("commit", "-qam", "other")
    g("checkout", "-q", "main")
    (repo / "f.txt").write_text("main\n")
    g("commit", "-qam", "main")
    subprocess.run(["git", "-C", str(repo), "merge", "other"], capture_output=True, stdin=subprocess.DEVNULL)
    baseline = capture_baseline(repo)
    assert "f.txt" in baseline.pre_existing_changed
    analysis = analyze_changes(baseline, repo)
    assert analysis.changed_files == [] and not analysis.has_changes


def test_mode_changes_and_empty_files_are_changes(tmp_path: Path) -> None:
    """Breaker finding: chmod +x, deleting an empty tracked file and committing a new empty file
    were all "no changes"."""
    repo = make_repo(tmp_path / "r", {"run.sh": "echo hi\n", "placeholder.txt": ""})
    b = capture_baseline(repo)
    (repo / "run.sh").chmod(0o755)
    assert analyze_changes(b, repo, "").changed_files == ["run.sh"]
    (repo / "run.sh").chmod(0o644)
    subprocess.run(["git", "rm", "-q", "placeholder.txt"], cwd=repo, check=True)
    assert analyze_changes(b, repo, "").changed_files == ["placeholder.txt"]
    subprocess.run(["git", "reset", "-q", "--hard"], cwd=repo, check=True)
    (repo / "py.typed").write_text("")
    subprocess.run(["git", "add", "py.typed"], cwd=repo, check=True)
    subprocess.run(["git", "-c", "user.name=a", "-c", "user.email=a@b", "commit", "-qm", "typed"], cwd=repo, check=True)
    assert analyze_changes(b, repo, "").has_changes


def test_the_patch_sees_an_edit_of_the_index_s_own_second(tmp_path: Path) -> None:
    """Racy git: an edit made in the second the index was written can have stat data that match
    its index entry; git compares such a file's content only because the index is not older
    than the entry. The patch's private index copy was stamped "now", a second later, so git
    trusted the stale entry and the round's patch left the agent's fix out (a test failed that
    way whenever the copy crossed a second). Set up here by times, not by luck."""
    from tianshu_mcp.acceptance.git.patch import change_patch

    repo = make_repo(tmp_path / "r", {"calc.py": "return a - b\n"})
    git(repo, "config", "core.trustctime", "false")  # the stat check then rests on mtime, size and inode
    old = time.time_ns() - 100 * 10**9
    os.utime(repo / "calc.py", ns=(old, old))
    git(repo, "update-index", "--refresh")  # the entry takes that mtime
    b = capture_baseline(repo)
    (repo / "calc.py").write_text("return a + b\n")  # same size, same inode
    os.utime(repo / "calc.py", ns=(old, old))
    os.utime(repo / ".git" / "index", ns=(old, old))  # the index written in that same second
    a = analyze_changes(b, repo, "")
    assert a.changed_files == ["calc.py"], a.to_json()  # git itself sees it (racily clean: content compared)
    patch = change_patch(b, repo, a)
    assert "+return a + b" in patch and "-return a - b" in patch, patch
