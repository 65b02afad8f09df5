"""The AI content judge (docs/visual.md §6) against a real scripted judge process (tests/scripted_judge.py):
placeholders, verdict contract, majority vote and confidence gate, timeouts and tree kills,
cancellation, env mapping, preflight and the per-task cache."""

from __future__ import annotations

import base64
import json
import os
import shutil
import stat
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from PIL import Image
from test_acceptance_runner import dead
from tianshu_mcp.acceptance.visual.content import (
    PLACEHOLDERS,
    check_content,
    effective,
    preflight,
    tally,
)
from tianshu_mcp.acceptance.visual.content_tally import parse_verdict
from tianshu_mcp.acceptance.visual.errors import VisualError

JUDGE = str(Path(__file__).resolve().parent / "scripted_judge.py")
PASS = '{"passed": true, "confidence": 0.9, "reason": "looks right"}'
FAIL = '{"passed": false, "confidence": 0.8, "reason": "button missing"}'


class Env:
    """A project with one PNG, a task dir and a round dir, and helpers to judge it."""

    def __init__(self, root: Path) -> None:
        self.project = root / "project"
        self.project.mkdir()
        self.task = root / "task"
        self.rounds = root / "round"
        self.image = self.project / "shot.png"
        Image.new("RGB", (16, 12), (200, 30, 30)).save(self.image)
        self.counter = root / "counter.txt"
        self.seen = root / "seen.jsonl"
        self.pids = root / "pids.txt"
        self.n = 0

    def content(self, args: list[str], **over: Any) -> dict[str, Any]:
        base = {"enabled": True, "command": sys.executable,
                "argsTemplate": [JUDGE, f"--counter={self.counter}", *args],
                "allowRemote": False, "samples": 3, "timeoutMs": 30000, "cache": True}
        base.update(over)
        return base

    def judge(self, content: dict[str, Any], check: dict[str, Any] | None = None, **kw: Any) -> dict[str, Any]:
        self.n += 1
        params: dict[str, Any] = {
            "result_id": "hero", "target": "shot.png", "image": self.image,
            "check": check or {"expect": "A red banner", "blocking": False},
            "content": content, "project_root": self.project,
            "evidence_dir": self.rounds / "content" / "hero" / str(self.n), "task_dir": self.task,
            "round_deadline": time.monotonic() + 120, "optional": True,
        }
        params.update(kw)
        return check_content(**params)

    def runs(self) -> int:
        return int(self.counter.read_text()) if self.counter.exists() else 0

    def seen_runs(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.seen.read_text().splitlines()]


@pytest.fixture
def env(tmp_path: Path) -> Env:
    return Env(tmp_path)


def votes(*sides: bool | None, conf: float | None = None) -> list[dict[str, Any]]:
    out = []
    for i, side in enumerate(sides):
        vote: dict[str, Any] = {"index": i, "passed": side, "reason": f"r{i}"}
        if conf is not None:
            vote["confidence"] = conf
        out.append(vote)
    return out


# --- tally (§6.4) ------------------------------------------------------------------------------

@pytest.mark.parametrize(("sides", "samples", "status", "code", "reason"), [
    ((True, True, True), 3, "passed", "CONTENT_MATCH", "r0"),
    ((False, True, True), 3, "passed", "CONTENT_MATCH", "r1"),
    ((True, False, False), 3, "failed", "CONTENT_MISMATCH", "r1"),
    ((True, False), 2, "uncertain", "CONTENT_UNCERTAIN",
     "Votes are not conclusive: 1 passed, 1 failed, 0 undecided out of 2 samples"),
    ((True, True, False, False), 4, "uncertain", "CONTENT_UNCERTAIN",
     "Votes are not conclusive: 2 passed, 2 failed, 0 undecided out of 4 samples"),
    ((True,), 3, "uncertain", "CONTENT_UNCERTAIN",
     "Votes are not conclusive: 1 passed, 0 failed, 0 undecided out of 3 samples"),
    ((True, None, None), 3, "uncertain", "CONTENT_UNCERTAIN",
     "Votes are not conclusive: 1 passed, 0 failed, 2 undecided out of 3 samples"),
    ((True,), 1, "passed", "CONTENT_MATCH", "r0"),
])
def test_majority_vote(sides: tuple[bool | None, ...], samples: int, status: str, code: str, reason: str) -> None:
    out = tally(votes(*sides), samples, None)
    assert (out["status"], out["code"], out["reason"]) == (status, code, reason)
    assert out["passedVotes"] == sides.count(True) and out["failedVotes"] == sides.count(False)
    assert out["invalidVotes"] == sum(1 for s in sides if s is None)
    assert out["confidenceGate"] == "off" and "confidence" not in out


def test_confidence_mean_and_the_four_gate_labels() -> None:
    mixed = votes(True, True, False)
    mixed[0]["confidence"], mixed[1]["confidence"] = 0.9, 0.6666  # the third reports none
    assert tally(mixed, 3, None)["confidence"] == 0.783
    assert tally(mixed, 3, None)["confidenceGate"] == "off"
    assert tally(votes(True, True, True), 3, 0.5)["confidenceGate"] == "no-confidence"
    assert tally(votes(True, True, True), 3, 0.5)["status"] == "passed"
    applied = tally(votes(True, True, True, conf=0.8), 3, 0.8)
    assert (applied["confidenceGate"], applied["status"], applied["confidence"]) == ("applied", "passed", 0.8)
    low = tally(votes(False, False, True, conf=0.4), 3, 0.8)
    assert (low["confidenceGate"], low["status"], low["code"]) == ("downgraded", "uncertain", "CONTENT_UNCERTAIN")
    assert low["reason"] == "r0 (mean confidence 0.4 below configured 0.8)"
    tie = tally(votes(True, False, conf=0.1), 2, 0.5)  # already uncertain: reason unchanged
    assert tie["confidenceGate"] == "downgraded" and "below configured" not in tie["reason"]


# --- verdict contract (§6.2) -------------------------------------------------------------------

@pytest.mark.parametrize("stdout", [
    "", "  \n\n", "garbage", "[1, 2]", '"passed"', '{"passed": true}', '{"passed": true, "reason": ""}',
    '{"passed": true, "reason": "   "}', '{"passed": true, "reason": "ok", "score": 1}',
    '{"passed": "yes", "reason": "ok"}', '{"passed": 1, "reason": "ok"}',
    '{"passed": true, "reason": "ok", "confidence": 1.5}', '{"passed": true, "reason": "ok", "confidence": -0.1}',
    '{"passed": true, "reason": "ok", "confidence": true}', '{"passed": true, "reason": "ok", "confidence": null}',
    '{"passed": true, "reason": "ok", "confidence": NaN}', '{"passed": true, "reason": "ok", "reason": "x"}',
    PASS + "\nnot json after the verdict",
])
def test_verdict_contract_rejects(stdout: str) -> None:
    with pytest.raises(VisualError) as err:
        parse_verdict(stdout)
    assert err.value.code == "CONTENT_OUTPUT_INVALID" and err.value.kind == "blocked"


def test_verdict_is_the_last_non_empty_line() -> None:
    assert parse_verdict("thinking…\n" + FAIL + "\n\n  \n") == {"passed": False, "confidence": 0.8, "reason": "button missing"}
    assert parse_verdict('{"passed": true, "reason": "ok", "confidence": 1}') == {"passed": True, "reason": "ok", "confidence": 1.0}
    assert parse_verdict('{"reason": "fine", "passed": true}') == {"passed": True, "reason": "fine"}


# --- the item flow with the real judge (§6.3) --------------------------------------------------

def test_passing_item_result_evidence_and_judge_contract(env: Env) -> None:
    probe = env.rounds / "content" / "hero" / "1" / "input" / "image.b64"  # unused placeholder → never made
    result = env.judge(env.content(["--verdict", PASS, f"--seen={env.seen}", "--file", "exp=<expect:file>",
                                    "--file", f"b64={probe}"]), viewport="desktop")
    assert result["status"] == "passed" and result["code"] == "CONTENT_MATCH" and result["message"] == "looks right"
    assert (result["id"], result["kind"], result["target"], result["viewport"]) == ("hero", "content", "shot.png", "desktop")
    assert result["optional"] is True and result["repairable"] is False
    assert result["rules"] == {"expect": "A red banner", "blocking": False}
    assert result["metrics"] == {"samples": 3, "passedVotes": 3, "failedVotes": 0, "invalidVotes": 0,
                                 "confidenceGate": "off", "cached": False}
    content = result["content"]
    assert content["provider"] == sys.executable and content["expect"] == "A red banner"
    assert content["cached"] is False and content["confidence"] == 0.9 and len(content["cacheKey"]) == 64
    assert content["votes"] == [{"index": i, "passed": True, "confidence": 0.9, "reason": "looks right"} for i in range(3)]
    source = Path(result["artifacts"]["source"])
    assert source == env.rounds / "content" / "hero" / "1" / "source.png"
    assert source.read_bytes() == env.image.read_bytes()
    runs = env.seen_runs()
    assert len(runs) == 3 and env.runs() == 3
    for run in runs:
        assert run["stdin"] == "" and run["ownGroup"] is True
        assert run["cwd"] == os.path.realpath(env.project)
        assert run["files"]["exp"]["exists"] and run["files"]["exp"]["text"] == "A red banner"
        assert run["files"]["b64"]["exists"] is False
    # the temp inputs lived only while the judge ran
    assert not Path(runs[0]["files"]["exp"]["path"]).exists()
    assert not (env.rounds / "content" / "hero" / "1" / "input").exists()
    entry = json.loads((env.task / "visual-content-cache" / f"{content['cacheKey']}.json").read_text())
    assert entry["schemaVersion"] == 1 and entry["key"] == content["cacheKey"] and entry["status"] == "passed"
    assert entry["votes"] == content["votes"] and entry["confidence"] == 0.9 and "A red banner" not in json.dumps(entry)


def test_placeholders_expand_inside_tokens_without_re_expansion(env: Env) -> None:
    odd = env.project / "shot<expect:file>.png"  # a path holding a placeholder's text is not re-expanded
    shutil.copy(env.image, odd)
    env.image = odd
    args = ["--verdict", PASS, f"--seen={env.seen}", "--file", "img=<image:path>",
            "--file", "b64=<image:base64:file>", "--file", "exp=<expect:file>",
            "--file", "combo=<expect:file>|<image:base64:file>|<expect:file>"]
    result = env.judge(env.content(args, allowRemote=True, samples=1), check={"expect": "Größe: <image:path>", "blocking": True},
                       optional=False)
    assert result["status"] == "passed", result
    run = env.seen_runs()[0]
    files = run["files"]
    assert files["img"]["path"] == str(odd) and files["img"]["exists"]
    assert base64.b64decode(files["b64"]["text"]) == odd.read_bytes()
    assert files["exp"]["text"] == "Größe: <image:path>"  # the expectation travels in the file, verbatim
    exp, b64 = files["exp"]["path"], files["b64"]["path"]
    assert files["combo"]["path"] == f"{exp}|{b64}|{exp}"
    assert not Path(exp).exists() and not Path(b64).exists()


@pytest.mark.parametrize(("verdicts", "samples", "status", "counts"), [
    ([PASS, FAIL, PASS], 3, "passed", (2, 1)),
    ([FAIL, FAIL, PASS], 3, "failed", (1, 2)),
    ([PASS, FAIL], 2, "uncertain", (1, 1)),
])
def test_votes_vary_per_sample(env: Env, verdicts: list[str], samples: int, status: str, counts: tuple[int, int]) -> None:
    args = [a for v in verdicts for a in ("--verdict", v)]
    result = env.judge(env.content(args, samples=samples))
    assert result["status"] == status and env.runs() == samples
    assert (result["metrics"]["passedVotes"], result["metrics"]["failedVotes"]) == counts
    assert result["repairable"] is (status == "failed")
    if status == "failed":
        assert result["code"] == "CONTENT_MISMATCH" and result["message"] == "button missing"


def test_low_confidence_downgrades_to_uncertain(env: Env) -> None:
    result = env.judge(env.content(["--verdict", FAIL], minConfidence=0.9))
    assert (result["status"], result["code"]) == ("uncertain", "CONTENT_UNCERTAIN")
    assert result["message"] == "button missing (mean confidence 0.8 below configured 0.9)"
    assert result["content"]["confidenceGate"] == "downgraded" and result["metrics"]["confidenceGate"] == "downgraded"
    assert result["repairable"] is False


@pytest.mark.parametrize("raw", ["garbage", '{"passed": true, "reason": "ok", "extra": 1}', '{"passed": true, "reason": ""}', ""])
def test_bad_output_is_blocked_and_stops_sampling(env: Env, raw: str) -> None:
    result = env.judge(env.content([f"--raw={raw}", "--file", "exp=<expect:file>"]))
    assert (result["status"], result["code"], result["repairable"]) == ("blocked", "CONTENT_OUTPUT_INVALID", False)
    assert "content" not in result and env.runs() == 1
    assert not (env.rounds / "content" / "hero" / "1" / "input").exists()
    assert not (env.task / "visual-content-cache").exists()


def test_non_zero_exit_reports_the_stderr_tail(env: Env) -> None:
    tail = "e" * 300000 + "THE END"
    result = env.judge(env.content(["--verdict", PASS, "--exit", "3", "--stderr-pad", "300000", "--stderr", "THE END"]))
    assert (result["status"], result["code"]) == ("blocked", "CONTENT_COMMAND_FAILED")
    assert result["message"] == "Judge command exited with 3: " + tail[-2000:]
    assert env.runs() == 1


def test_a_failing_sample_stops_sampling(env: Env) -> None:
    result = env.judge(env.content(["--verdict", PASS, "--fail-on", "1"]))
    assert (result["code"], result["message"]) == ("CONTENT_COMMAND_FAILED", "Judge command exited with 3: boom 1\n")
    assert env.runs() == 2


def test_long_output_keeps_the_verdict(env: Env) -> None:
    result = env.judge(env.content(["--verdict", PASS, "--noise", "2000000"], samples=1))
    assert result["status"] == "passed", result["message"]


def test_output_flood_is_stopped(env: Env) -> None:
    result = env.judge(env.content(["--flood"], samples=1))
    assert (result["status"], result["code"]) == ("blocked", "CONTENT_OUTPUT_INVALID")


def _pids(env: Env) -> list[int]:
    return [int(p) for p in env.pids.read_text().split()]


def test_hanging_judge_times_out_and_its_tree_is_killed(env: Env) -> None:
    result = env.judge(env.content(["--hang", f"--pids={env.pids}", "--file", "exp=<expect:file>"], timeoutMs=4000))
    assert (result["status"], result["code"]) == ("blocked", "CONTENT_TIMEOUT")
    assert result["message"] == "Judge command timed out after 4000ms"
    judge, grandchild = _pids(env)
    assert dead(judge, 10.0) and dead(grandchild, 10.0)
    assert not (env.rounds / "content" / "hero" / "1" / "input").exists()


def test_round_budget_bounds_a_sample(env: Env) -> None:
    result = env.judge(env.content(["--hang-on", "0", f"--pids={env.pids}"], timeoutMs=60000),
                       round_deadline=time.monotonic() + 4)
    assert (result["status"], result["code"]) == ("blocked", "ROUND_TIMEOUT")
    assert all(dead(pid, 10.0) for pid in _pids(env))
    expired = env.judge(env.content(["--verdict", PASS]), round_deadline=time.monotonic() - 1)
    assert expired["code"] == "ROUND_TIMEOUT" and env.runs() == 1


def test_cancellation_kills_the_judge_and_skips(env: Env) -> None:
    result = env.judge(env.content(["--hang", f"--pids={env.pids}"]), should_stop=env.pids.exists)
    assert (result["status"], result["code"], result["repairable"]) == ("skipped", "CANCELLED", False)
    assert all(dead(pid, 10.0) for pid in _pids(env))
    assert not (env.task / "visual-content-cache").exists()
    before = env.judge(env.content(["--verdict", PASS]), should_stop=lambda: True)
    assert before["status"] == "skipped" and env.runs() == 1


def test_env_mapping_and_missing_host_variable(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TS_TEST_HOST_KEY", "s3cret")
    content = env.content(["--verdict", PASS, f"--seen={env.seen}", "--env", "JUDGE_KEY"], samples=1,
                          env={"JUDGE_KEY": "TS_TEST_HOST_KEY"})
    assert env.judge(content)["status"] == "passed"
    assert env.seen_runs()[0]["env"] == {"JUDGE_KEY": "s3cret"}
    monkeypatch.delenv("TS_TEST_HOST_KEY")
    result = env.judge(content)
    assert (result["status"], result["code"]) == ("blocked", "CONTENT_ENV_MISSING")
    assert "TS_TEST_HOST_KEY" in result["message"] and "s3cret" not in json.dumps(result)
    assert env.runs() == 1


def test_command_resolution_spawn_failures(env: Env) -> None:
    tools = env.project / "tools"
    tools.mkdir()
    judge = tools / "judge.py"
    shutil.copy(JUDGE, judge)
    judge.chmod(judge.stat().st_mode | stat.S_IXUSR)
    args = [f"--counter={env.counter}", "--verdict", PASS, f"--seen={env.seen}"]
    content = {"enabled": True, "command": "./judge.py", "argsTemplate": args, "cwd": "tools", "samples": 1, "cache": False}
    eff = effective(content, {"expect": "x"}, env.project)
    assert eff.command_path == str(Path(os.path.realpath(tools)) / "judge.py") and eff.cwd == Path(os.path.realpath(tools))
    assert env.judge(content)["status"] == "passed"
    assert env.seen_runs()[0]["cwd"] == os.path.realpath(tools)
    judge.chmod(0o644)
    not_exec = env.judge(content)
    assert not_exec["code"] == "CONTENT_COMMAND_FAILED" and not_exec["message"].startswith("Judge command failed to start: ")
    missing = env.judge({**content, "command": "./nope.py"})
    assert missing["code"] == "CONTENT_COMMAND_FAILED" and "failed to start" in missing["message"]


# --- effective parameters (§6.1, §6.2) ---------------------------------------------------------

def test_effective_precedence_and_defaults(env: Env) -> None:
    (env.project / "sub").mkdir()
    content = {"enabled": True, "command": sys.executable, "argsTemplate": ["<image:path>"], "env": {"A": "B"},
               "timeoutMs": 5000, "minConfidence": 0.7, "cache": False}
    eff = effective(content, {"expect": "x"}, env.project)
    assert (eff.samples, eff.allow_remote, eff.cwd, eff.env, eff.timeout_ms, eff.min_confidence, eff.cache) == (
        3, False, Path(os.path.realpath(env.project)), {"A": "B"}, 5000, 0.7, False)
    assert eff.command_path == sys.executable and eff.command_digest is not None
    rule = {"expect": "x", "command": "python3", "argsTemplate": ["<image:base64:file>"], "cwd": "sub",
            "env": {}, "allowRemote": True, "samples": 5}
    eff = effective(content, rule, env.project)
    assert (eff.command, eff.args_template, eff.cwd.name, eff.env, eff.allow_remote, eff.samples) == (
        "python3", ["<image:base64:file>"], "sub", {}, True, 5)
    assert eff.command_path == shutil.which("python3")
    assert effective({"enabled": True, "command": "no-such-judge-xyz", "argsTemplate": ["a"]}, {"expect": "x"},
                     env.project).command_digest is None


def test_command_digest_follows_the_judge_script(env: Env) -> None:
    script = env.project / "judge.py"
    shutil.copy(JUDGE, script)
    content = {"enabled": True, "command": sys.executable, "argsTemplate": ["judge.py", "--flag", "<image:path>"]}
    first = effective(content, {"expect": "x"}, env.project).command_digest
    assert first == effective(content, {"expect": "y"}, env.project).command_digest
    script.write_text(script.read_text() + "\n# changed\n")
    assert effective(content, {"expect": "x"}, env.project).command_digest != first


@pytest.mark.parametrize(("content", "rule"), [
    ({"argsTemplate": ["<image:path>"]}, {}),
    ({"command": "python3"}, {}),
    ({"command": "python3", "argsTemplate": []}, {}),
    ({"command": "python3", "argsTemplate": ["<image:base64:file>"]}, {}),
    ({"command": "python3", "argsTemplate": ["<image:base64:file>"], "allowRemote": True}, {"allowRemote": False}),
    ({"command": "python3", "argsTemplate": ["--in=<image:url>"]}, {}),
    ({"command": "python3", "argsTemplate": ["<image:path>"]}, {"argsTemplate": ["<expect:text>"]}),
    ({"command": "python3", "argsTemplate": ["<image:path>"], "samples": 0}, {}),
    ({"command": "python3", "argsTemplate": ["<image:path>"], "env": {"bad-name": "X"}}, {}),
])
def test_effective_refuses_bad_configuration(env: Env, content: dict[str, Any], rule: dict[str, Any]) -> None:
    with pytest.raises(VisualError) as err:
        effective({"enabled": True, **content}, {"expect": "x", **rule}, env.project)
    assert err.value.code == "CONTENT_CONFIG_INVALID" and err.value.kind == "blocked"


def test_effective_cwd_is_project_gated(env: Env, tmp_path: Path) -> None:
    (env.project / "out").symlink_to(tmp_path)
    for cwd in ("../elsewhere", "/tmp", "out"):
        with pytest.raises(VisualError) as err:
            effective({"command": "python3", "argsTemplate": ["a"], "cwd": cwd}, {"expect": "x"}, env.project)
        assert err.value.code == "PATH_OUTSIDE_PROJECT"


def test_unknown_placeholder_at_runtime_runs_nothing(env: Env) -> None:
    result = env.judge(env.content(["--verdict", PASS, "--in=<image:url>"]))
    assert (result["status"], result["code"]) == ("blocked", "CONTENT_CONFIG_INVALID")
    assert "<image:url>" in result["message"] and env.runs() == 0
    assert set(PLACEHOLDERS) == {"<image:path>", "<expect:file>", "<image:base64:file>"}


def test_bad_images_fail_before_the_judge(env: Env) -> None:
    Image.effect_noise((64, 64), 80).save(env.image)
    whole = env.image.read_bytes()
    env.image.write_bytes(whole[: len(whole) // 2])
    corrupt = env.judge(env.content(["--verdict", PASS]))
    assert (corrupt["status"], corrupt["code"], corrupt["repairable"]) == ("failed", "IMAGE_CORRUPT", True)
    env.image.write_bytes(whole[:20])  # a PNG signature and a cut header
    assert env.judge(env.content(["--verdict", PASS]))["code"] == "IMAGE_CORRUPT"
    gif = env.project / "a.gif"
    Image.new("RGB", (4, 4)).save(gif)
    unsupported = env.judge(env.content(["--verdict", PASS]), image=gif)
    assert (unsupported["status"], unsupported["code"], unsupported["repairable"]) == ("failed", "IMAGE_UNSUPPORTED", True)
    assert env.judge(env.content(["--verdict", PASS]), image=env.project / "none.png")["code"] == "IMAGE_MISSING"
    assert env.runs() == 0


# --- preflight (§2 step 2) ---------------------------------------------------------------------

def test_preflight_codes_and_labels(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    good = {"enabled": True, "command": sys.executable, "argsTemplate": [JUDGE]}
    preflight(good, [("logo", {"expect": "x"}), ("home (page content)", {"expect": "y"})], env.project)
    preflight({**good, "enabled": False, "command": "no-such-judge-xyz"}, [("logo", {"expect": "x"})], env.project)
    preflight({**good, "command": "no-such-judge-xyz"}, [], env.project)
    with pytest.raises(VisualError) as err:
        preflight(good, [("logo", {"expect": "x"}), ("home (page content)", {"expect": "y", "command": "no-such-judge-xyz"})],
                  env.project)
    assert err.value.code == "CONTENT_COMMAND_MISSING"
    assert err.value.message == "home (page content): cannot resolve content judge command 'no-such-judge-xyz'"
    monkeypatch.delenv("TS_TEST_ABSENT_VAR", raising=False)
    with pytest.raises(VisualError) as err:
        preflight({**good, "env": {"KEY": "TS_TEST_ABSENT_VAR"}}, [("logo", {"expect": "x"})], env.project)
    assert err.value.code == "CONTENT_ENV_MISSING" and err.value.message.startswith("logo: ")
    with pytest.raises(VisualError) as err:
        preflight(good, [("logo", {"expect": "x", "argsTemplate": ["<nope>"]})], env.project)
    assert err.value.code == "CONTENT_CONFIG_INVALID" and err.value.message.startswith("logo: ")


# --- the cache (§6.3) --------------------------------------------------------------------------

def test_cache_hit_runs_no_command_and_a_changed_expect_misses(env: Env) -> None:
    content = env.content(["--verdict", FAIL, "--verdict", PASS, "--verdict", FAIL])
    first = env.judge(content)
    assert first["status"] == "failed" and env.runs() == 3
    again = env.judge(content)
    assert env.runs() == 3 and again["content"]["cached"] is True and again["metrics"]["cached"] is True
    assert (again["status"], again["code"], again["message"]) == (first["status"], first["code"], first["message"])
    assert again["content"]["votes"] == first["content"]["votes"]
    assert again["content"]["cacheKey"] == first["content"]["cacheKey"]
    assert Path(again["artifacts"]["source"]).read_bytes() == env.image.read_bytes()
    changed = env.judge(content, check={"expect": "A blue banner", "blocking": False})
    assert changed["content"]["cached"] is False and env.runs() == 6
    other_task = env.judge(content, task_dir=env.task.parent / "task2")
    assert other_task["content"]["cached"] is False and env.runs() == 9


def test_cache_off_or_unfinished_judgement_writes_nothing(env: Env) -> None:
    off = env.judge(env.content(["--verdict", PASS], cache=False, samples=1))
    assert off["status"] == "passed" and not (env.task / "visual-content-cache").exists()
    assert env.judge(env.content(["--verdict", PASS], cache=False, samples=1))["content"]["cached"] is False
    assert env.runs() == 2


def test_corrupt_or_foreign_cache_entries_miss(env: Env) -> None:
    content = env.content(["--verdict", PASS], samples=1)
    key = env.judge(content)["content"]["cacheKey"]
    entry = env.task / "visual-content-cache" / f"{key}.json"
    entry.write_text("{not json")
    assert env.judge(content)["content"]["cached"] is False and env.runs() == 2
    data = json.loads(entry.read_text())
    entry.write_text(json.dumps({**data, "schemaVersion": 2}))
    assert env.judge(content)["content"]["cached"] is False and env.runs() == 3
    assert env.judge(content)["content"]["cached"] is True and env.runs() == 3


def test_a_changed_judge_script_misses_the_cache(env: Env) -> None:
    script = env.project / "judge.py"
    shutil.copy(JUDGE, script)
    content = {**env.content(["--verdict", PASS], samples=1)}
    content["argsTemplate"] = ["judge.py", *content["argsTemplate"][1:]]
    env.judge(content)
    assert env.judge(content)["content"]["cached"] is True and env.runs() == 1
    script.write_text(script.read_text() + "\n# v2\n")
    assert env.judge(content)["content"]["cached"] is False and env.runs() == 2


# --- content rules in a verify round: uncertain never gates, a blocking mismatch does (§6.5) -----

@pytest.mark.parametrize(("verdicts", "samples", "min_confidence", "blocking", "status", "code", "gates"), [
    ([PASS, FAIL], 2, None, True, "uncertain", "CONTENT_UNCERTAIN", False),  # a split vote
    (['{"passed": false, "confidence": 0.4, "reason": "button missing"}'], 1, 0.8, True,
     "uncertain", "CONTENT_UNCERTAIN", False),  # a mismatch below minConfidence is downgraded
    ([FAIL, FAIL, PASS], 3, None, True, "failed", "CONTENT_MISMATCH", True),
    ([FAIL], 1, None, False, "failed", "CONTENT_MISMATCH", False),  # a warning only (blocking false)
], ids=["split-vote", "low-confidence", "blocking-mismatch", "warning-mismatch"])
def test_a_content_rule_in_a_verify_round_gates_only_on_a_blocking_mismatch(
        tmp_path: Path, verdicts: list[str], samples: int, min_confidence: float | None, blocking: bool,
        status: str, code: str, gates: bool) -> None:
    from test_acceptance_engine import git, make_pytest_repo, request
    from tianshu_mcp.acceptance.engine import verify_round
    from tianshu_mcp.acceptance.git import capture_baseline

    counter = tmp_path / "counter.txt"
    content: dict[str, Any] = {"enabled": True, "command": sys.executable, "samples": samples, "timeoutMs": 30000,
                               "argsTemplate": [JUDGE, f"--counter={counter}", *[f"--verdict={v}" for v in verdicts],
                                                "--file=image=<image:path>"]}
    if min_confidence is not None:
        content["minConfidence"] = min_confidence
    visual = {"enabled": True, "content": content,
              "contents": [{"id": "hero", "files": ["site/hero.png"], "expect": "A red banner with a Buy button",
                            "blocking": blocking}]}
    repo = make_pytest_repo(tmp_path / "repo", gitignore=True)
    (repo / "site").mkdir()
    Image.new("RGB", (32, 16), (200, 30, 30)).save(repo / "site" / "hero.png")
    (repo / ".tianshu-mcp").mkdir()
    (repo / ".tianshu-mcp" / "acceptance.json").write_text(json.dumps({"checks": [], "visual": visual}))
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "content rule")
    baseline = capture_baseline(repo)
    (repo / "notes.txt").write_text("the agent's work\n")
    out = verify_round(request(tmp_path, repo, baseline=baseline))

    assert int(counter.read_text()) == samples  # the judge really ran, once per sample
    [item] = out.report["visual"]["results"]
    assert (item["id"], item["kind"], item["target"], item["status"], item["code"]) == (
        "hero", "content", "site/hero.png", status, code), item
    assert item["optional"] is (not blocking) and item["repairable"] is (status == "failed")
    assert out.blocking_issues == []  # a verdict is never a blocking issue
    message = out.report["message"].lower()
    if gates:
        assert not out.passed and out.report["verdict"] == "failed", message
        assert "visual defects: hero" in message, message
    else:
        assert out.passed and out.report["verdict"] == "passed", message
        assert "visual defects" not in message, message
        if status == "uncertain":
            assert "ai content judgement uncertain (warning only): hero" in message, message
        else:
            assert "optional content checks did not pass (do not affect the verdict): hero [content_mismatch]" in message
