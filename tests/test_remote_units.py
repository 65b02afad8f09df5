"""Remote tasks without a cluster: what a call may name, the worker's clone (real git, real
subprocesses), and the caller's reading of a published record (docs/isolation.md §2–§3)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fixture_project import git, make_calc_repo
from tianshu_mcp.core.errors import ErrorCode, TianshuError
from tianshu_mcp.core.remotes import check_pool, check_ref, check_repo_url, repo_key
from tianshu_mcp.mcp_server.remote_sync import merge_fields, parse_record, write_files
from tianshu_mcp.core.git.remote_clone import clone_dir, push_result, sync_clone

BIN = Path(sys.executable).parent


@pytest.mark.parametrize("url", ["https://example.com/a/b.git", "ssh://git@example.com/r.git", "git@example.com:r.git",
                                 "file:///srv/r.git", "/srv/git/r.git", "http://host:8080/r", "git://host/r.git",
                                 "https://user@example.com/r.git".replace("user@", "")])
def test_repo_urls_a_worker_can_clone_are_accepted(url: str) -> None:
    assert check_repo_url(f"  {url} ") == url


@pytest.mark.parametrize("url,why", [
    ("", "give a git remote"), ("relative/path", "not a git remote"), ("-uevil", "git option"),
    ("https://u:tok3n@example.com/r.git", "credentials"), ("https://tok3n@example.com/r.git", "credentials"),
    ("ftp://example.com/r.git", "not supported"), ("https:///r.git", "names no host"), ("/a b/r.git", "give a git remote"),
    ("ext::sh -c evil", "give a git remote"), ("ext::sh", "remote helper"), ("fd::17", "remote helper"),
    ("user:tok3n@example.com:r.git", "credentials"), ("a@b@example.com:r.git", "not a git remote"),
    ("https://example.com/r.git?access_token=tok3n", "query string"), ("https://example.com/r.git#tok3n", "query string"),
    ("-uX", "git option"),
])
def test_bad_repo_urls_are_refused_without_echoing_secrets(url: str, why: str) -> None:
    with pytest.raises(TianshuError) as err:
        check_repo_url(url)
    assert err.value.code == ErrorCode.INVALID_ARGUMENT and why in err.value.message
    assert "tok3n" not in err.value.message


@pytest.mark.parametrize("ref", ["--upload-pack=x", "a..b", "a b", "x~1", "x^", "a:b", "", "/x", "x/", "x.lock", "@{-1}", "@"])
def test_bad_refs_are_refused(ref: str) -> None:
    with pytest.raises(TianshuError) as err:
        check_ref(ref)
    assert err.value.code == ErrorCode.INVALID_ARGUMENT


@given(st.text(max_size=80) | st.from_regex(r"[a-z./@{}-]{1,12}", fullmatch=True))
@settings(max_examples=300, deadline=None)
def test_ref_and_pool_checks_never_crash_and_what_passes_git_accepts(text: str) -> None:
    for check in (check_ref, check_pool, check_repo_url):
        try:
            check(text)
        except TianshuError as exc:
            assert exc.code == ErrorCode.INVALID_ARGUMENT
            continue
        if check is check_ref:  # a ref we let through is a name git itself accepts
            r = subprocess.run(["git", "check-ref-format", "--allow-onelevel", text], capture_output=True)
            assert r.returncode == 0, text


def test_repo_key_ignores_only_a_trailing_slash() -> None:
    """``r`` and ``r.git`` can be two repositories (a breaker shared one clone between them)."""
    assert repo_key("https://h/r.git") == repo_key("https://h/r.git/")
    assert repo_key("https://h/r") != repo_key("https://h/r.git") and repo_key("https://h/r") != repo_key("https://h/s")


def _bare(tmp: Path) -> Path:
    src = make_calc_repo(tmp / "src")
    git(src, "tag", "v1")
    git(src, "checkout", "-q", "-b", "feature")
    (src / "feature.txt").write_text("f\n")
    git(src, "add", "-A")
    git(src, "commit", "-q", "-m", "feature")
    git(src, "checkout", "-q", "main")
    bare = tmp / "r.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(src), str(bare)], check=True)
    return bare


def test_clone_then_fetch_resolves_branch_tag_commit_and_head(tmp_path: Path) -> None:
    bare = _bare(tmp_path)
    home = tmp_path / "home"
    clone, head = sync_clone(home, str(bare), "HEAD", "tsk_1")
    assert clone == str(clone_dir(home, str(bare))) and head == git(bare, "rev-parse", "main").strip()
    assert sync_clone(home, str(bare), "feature", "tsk_1")[1] == git(bare, "rev-parse", "feature").strip()
    assert sync_clone(home, str(bare), "refs/heads/feature", "tsk_1")[1] == git(bare, "rev-parse", "feature").strip()
    assert sync_clone(home, str(bare), "refs/tags/v1", "tsk_1")[1] == head
    assert sync_clone(home, str(bare), "v1", "tsk_1")[1] == head
    assert sync_clone(home, str(bare), head[:10], "tsk_1")[1] == head
    with pytest.raises(TianshuError) as err:
        sync_clone(home, str(bare), "nope", "tsk_1")
    assert err.value.code == ErrorCode.REF_NOT_FOUND
    # a pushed result branch of the task reaches another worker's clone
    git(Path(clone), "branch", "tianshu/tsk_2", head)
    push_result(clone, "tianshu/tsk_2", str(bare))
    other, _ = sync_clone(tmp_path / "home2", str(bare), "HEAD", "tsk_2")
    assert git(Path(other), "rev-parse", "tianshu/tsk_2").strip() == head


def test_missing_remote_is_remote_unavailable_and_leaves_no_half_clone(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with pytest.raises(TianshuError) as err:
        sync_clone(home, str(tmp_path / "missing.git"), "HEAD", "tsk_1")
    assert err.value.code == ErrorCode.REMOTE_UNAVAILABLE and "git said" in err.value.message
    assert [p.name for p in (home / "remotes").iterdir() if p.is_dir()] == []


def test_published_record_becomes_the_callers_copy(tmp_path: Path) -> None:
    payload = {"format": "tianshu-remote-record/1", "taskDir": "/w/home/tasks/tsk_1",
               "record": {"taskId": "tsk_1", "projectPath": "/w/home/remotes/k", "lastMessage": "verification passed",
                          "reportMd": "/w/home/tasks/tsk_1/report-0.md", "logFile": "/elsewhere/x.log",
                          "workPath": "/w/wt", "resultBranch": "tianshu/tsk_1"},
               "files": {"report-0.md": "# report", "logs/agent-0.log": "log", "../escape.txt": "no", "/abs": "no"}}
    data = "```json\n" + json.dumps(payload) + "\n```\n"
    parsed = parse_record(data)
    assert parsed is not None
    fields = merge_fields(parsed, str(tmp_path))
    assert fields == {"lastMessage": "verification passed", "reportMd": f"{tmp_path}/report-0.md", "logFile": None,
                      "resultBranch": "tianshu/tsk_1"}
    assert write_files(parsed, tmp_path) == 2
    assert (tmp_path / "report-0.md").read_text() == "# report" and (tmp_path / "logs" / "agent-0.log").exists()
    assert not (tmp_path.parent / "escape.txt").exists()
    assert parse_record("not json") is None
    assert parse_record(json.dumps({**payload, "format": "other/9"})) is None


def test_worker_command_refuses_bad_usage_and_needs_a_server(tmp_path: Path) -> None:
    env = {"PATH": f"{BIN}:/usr/bin:/bin", "TIANSHU_MCP_HOME": str(tmp_path / "h")}
    cases = [(["worker"], 2, "--pool NAME is required"), (["worker", "--pool", "a b"], 2, "not a work pool name"),
             (["worker", "--pool", "p", "--limit", "0"], 2, "1..1000"), (["worker", "--pool", "p"], 1, "TIANSHU_PREFECT_API_URL")]
    for argv, code, said in cases:
        r = subprocess.run([str(BIN / "tianshu-mcp"), *argv], env=env, capture_output=True, text=True, timeout=120)
        assert r.returncode == code and said in r.stderr, (argv, r.returncode, r.stderr)


@pytest.mark.parametrize("commit", [None, "0123456789abcdef0123456789abcdef01234567"])
def test_only_a_committed_result_is_pushed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, commit: str | None) -> None:
    """Breaker: a remote task whose agent never started (agent_unresolved) pushed its result branch,
    the unchanged base commit under a new name, to the shared remote and said resultPushed."""
    from prefect.states import Completed, Failed

    from tianshu_mcp.core.taskstore import TaskStore
    from tianshu_mcp.flows import remote as flow_remote

    home = tmp_path / "home"
    monkeypatch.setenv("TIANSHU_MCP_HOME", str(home))
    pushed: list[tuple[str, ...]] = []
    monkeypatch.setattr(flow_remote, "push_result", lambda *args: pushed.append(args))
    monkeypatch.setattr(flow_remote, "publish_record", lambda task_id: None)
    tid = "tsk_20261203174043_be9f0f"
    fields = {"taskId": tid, "createdAt": "2026-12-03T17:40:43Z", "projectPath": str(tmp_path / "clone"),
              "resultBranch": f"tianshu/{tid}", "repoUrl": "file:///srv/repo.git"}
    TaskStore(home).create(tid, {**fields, **({"resultCommit": commit} if commit else {})})
    for state in (Failed(message="agent_unresolved"), Completed()):
        flow_remote.leave_remote(tid, state)
    meta = TaskStore(home).read(tid) or {}
    if commit:
        assert len(pushed) == 2 and meta.get("resultPushed") is True
    else:
        assert pushed == [] and "resultPushed" not in meta, meta
