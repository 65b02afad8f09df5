"""Chinese text (issue 12, must-show 3): the locale setting, the gettext catalogue, and a scripted
session in zh-CN whose codes, meta keys and structuredContent keys equal an English session's."""

from __future__ import annotations

import json
import logging
import re
import string
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest

from conftest import mcp_client, meta_of, text_of

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

import i18n_catalogue as catalogue  # noqa: E402
from babel.messages.pofile import read_po  # noqa: E402

from tianshu_mcp.core import i18n  # noqa: E402
from tianshu_mcp.core.errors import ErrorCode, TianshuError  # noqa: E402
from tianshu_mcp.core.taskstore import TaskStore  # noqa: E402

HAN = re.compile(r"[\u4e00-\u9fff]")
ERROR_RE = re.compile(r"^Error: \[([A-Z_]+)\] ")


@pytest.fixture
def warnings_of_i18n() -> Iterator[list[str]]:
    """WARNING messages of the ``tianshu_mcp`` logger while the test runs (the warn-once memory reset)."""
    seen: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record.getMessage())

    handler = Keep(logging.WARNING)
    logger = logging.getLogger("tianshu_mcp")
    logger.addHandler(handler)
    i18n._warned.clear()
    try:
        yield seen
    finally:
        logger.removeHandler(handler)


def fields(text: str) -> set[str]:
    """The named placeholders of a ``str.format`` template (raises ValueError when malformed)."""
    return {name for _lit, name, _spec, _conv in string.Formatter().parse(text) if name is not None}


def zh_catalogue() -> Any:
    with catalogue.po_path("zh_CN").open("rb") as fh:
        return read_po(fh, locale="zh_CN")


# --- resolution ------------------------------------------------------------------------------

@pytest.mark.parametrize("raw, expected", [
    ("zh-CN", "zh_CN"), ("zh_CN", "zh_CN"), ("zh", "zh_CN"), ("ZH-cn", "zh_CN"), ("zh-Hans", "zh_CN"),
    ("zh_CN.UTF-8", "zh_CN"), ("en", "en"), ("en-US", "en"), ("en_GB.UTF-8", "en"), ("xx", None), ("", None),
    ("zh-TW", None),
])
def test_normalisation(raw: str, expected: str | None) -> None:
    assert i18n.normalize_locale(raw) == expected


def test_env_overrides_config_and_config_applies_alone(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"locale": "zh-CN"}))
    assert i18n.resolve_locale(tmp_path, env={}) == "zh_CN"
    assert i18n.resolve_locale(tmp_path, env={"TIANSHU_MCP_LOCALE": "en-US"}) == "en"
    assert i18n.resolve_locale(tmp_path, env={"TIANSHU_MCP_LOCALE": ""}) == "zh_CN"  # empty = unset
    (tmp_path / "config.json").write_text(json.dumps({"locale": "en", "concurrency": {"maxRunning": 3}}))
    assert i18n.resolve_locale(tmp_path, env={}) == "en"  # an edited config.json is followed without a restart
    assert i18n.resolve_locale(tmp_path / "nowhere", env={}) == "en"  # no config: the default
    assert i18n.resolve_locale(tmp_path, env={"TIANSHU_MCP_LOCALE": "zh"}) == "zh_CN"


def test_unknown_config_locale_falls_back_to_en_with_one_warning(tmp_path: Path, warnings_of_i18n: list[str]) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"locale": "xx"}))
    assert i18n.resolve_locale(tmp_path, env={}) == "en"
    assert i18n.resolve_locale(tmp_path, env={}) == "en"
    hits = [w for w in warnings_of_i18n if "unknown locale 'xx'" in w]
    assert len(hits) == 1 and "config.json" in hits[0], warnings_of_i18n


def test_unknown_env_locale_warns_and_text_stays_english(monkeypatch: pytest.MonkeyPatch,
                                                         warnings_of_i18n: list[str]) -> None:
    monkeypatch.setenv("TIANSHU_MCP_LOCALE", "klingon")
    assert i18n._("task not found: {taskId}") == "task not found: {taskId}"
    assert any("unknown locale 'klingon' in TIANSHU_MCP_LOCALE" in w for w in warnings_of_i18n)


def test_zh_text_in_process(monkeypatch: pytest.MonkeyPatch) -> None:
    from tianshu_mcp.mcp_server.format import error_result, validate_arguments

    monkeypatch.setenv("TIANSHU_MCP_LOCALE", "zh-CN")
    assert i18n._("task not found: {taskId}").format(taskId="tsk_x") == "任务不存在: tsk_x"
    assert i18n.ngettext("{n} round used", "{n} rounds used", 2).format(n=2) == "已用 2 轮"
    with pytest.raises(TianshuError) as caught:
        validate_arguments("wait_task", {"type": "object", "properties": {"timeoutMs": {"type": "integer"}},
                                         "required": ["taskId"]}, {})
    result = error_result(caught.value)
    assert result.content[0].text == "Error: [INVALID_ARGUMENT] 参数不合法（wait_task）— taskId: 必填"
    assert result.structured_content == {"error": {"code": "INVALID_ARGUMENT", "message": caught.value.message}}
    monkeypatch.setenv("TIANSHU_MCP_LOCALE", "en")
    assert i18n._("task not found: {taskId}") == "task not found: {taskId}"


def test_zh_config_errors_keep_their_codes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """check_config (CONFIG_INVALID) and an acceptance layer: Chinese text, the same code; logs stay English."""
    from pydantic import ValidationError

    from tianshu_mcp.acceptance.config import AcceptanceConfigError, parse_layer_bytes
    from tianshu_mcp.core.settings import ServerConfig, check_config, describe_config_error

    (tmp_path / "config.json").write_text(json.dumps({"notifications": {"webhook": {"enabled": True, "url": "ftp://x"}}}))
    texts = {}
    for loc in ("en", "zh-CN"):
        monkeypatch.setenv("TIANSHU_MCP_LOCALE", loc)
        with pytest.raises(TianshuError) as caught:
            check_config(tmp_path)
        assert caught.value.code == ErrorCode.CONFIG_INVALID
        texts[loc] = caught.value.message
    path = tmp_path / "config.json"
    assert texts["en"] == f"{path}: notifications.webhook.url must be an http(s) URL, got 'ftp://x'"
    assert texts["zh-CN"] == f"{path}: notifications.webhook.url 必须是 http(s) URL，收到 'ftp://x'"
    with pytest.raises(ValidationError) as bad:  # the log's description (the config cache) stays English
        ServerConfig.model_validate({"notifications": {"webhook": {"enabled": True}}})
    assert describe_config_error(path, bad.value).endswith("notifications.webhook.url is required when enabled is true")
    (tmp_path / "config.json").write_text("[1]")
    with pytest.raises(TianshuError) as caught:
        check_config(tmp_path)
    assert (caught.value.code, caught.value.message) == (ErrorCode.CONFIG_INVALID, f"{path}：顶层必须是 JSON 对象")
    with pytest.raises(AcceptanceConfigError) as layer:
        parse_layer_bytes(b"{", "project", "/p/.tianshu-mcp/acceptance.json")
    assert layer.value.code == ErrorCode.CONFIG_INVALID
    assert layer.value.message.startswith("project 验收配置 /p/.tianshu-mcp/acceptance.json 不是合法 JSON：")


def test_zh_dry_run_and_visual_report_sections(monkeypatch: pytest.MonkeyPatch) -> None:
    from tianshu_mcp.acceptance.dry_run import render_markdown
    from tianshu_mcp.acceptance.visual.report import visual_html, visual_markdown

    report = {"number": 0, "verdict": "ready", "projectPath": "/p", "autoFixRounds": 1, "git": {"isRepo": False},
              "agent": {"id": "scripted", "ok": False, "message": "m"}, "acceptance": {"checks": [], "requireChanges": True},
              "findings": []}
    visual = {"passed": False, "message": "m", "visual": {"results": [
        {"id": "home", "viewport": "desktop", "status": "failed", "code": "C", "message": "x", "metrics": {},
         "content": {"expect": "e", "confidenceGate": "no-confidence", "votes": [], "provider": "judge", "cached": False}}]}}
    monkeypatch.setenv("TIANSHU_MCP_LOCALE", "en")
    en_md = render_markdown(report)
    assert en_md.startswith("# Dry run 0 — ready\n") and "## Checks that would run" in en_md
    monkeypatch.setenv("TIANSHU_MCP_LOCALE", "zh-CN")
    md = render_markdown(report)
    assert md.startswith("# 预演 0 — ready\n") and "\n## 将运行的检查\n" in md and "- git：不是仓库" in md
    assert md.count("\n") == en_md.count("\n")  # the same structure
    vis = visual_markdown(visual)
    assert vis.startswith("## 视觉验收\n") and "- 置信度闸门：命令未提供 confidence，minConfidence 未生效" in vis  # 30-visual §10
    assert "### home / desktop [failed]" in vis and "- 提供者命令：judge；命中缓存：否" in vis
    page = visual_html(visual, "/t")
    assert "<h3>视觉验收 — failed</h3>" in page and '<option value="all">全部</option>' in page


def test_zh_git_grading_and_check_reasons(monkeypatch: pytest.MonkeyPatch) -> None:
    """GitFailed quotes git's own words untranslated; check reasons keep their English constants
    (compared by code) and are translated when shown; baseline-grading text for the verdict."""
    from tianshu_mcp.acceptance.git import Baseline, GitResult, git_failed
    from tianshu_mcp.acceptance.grading import _decide, grade_round
    from tianshu_mcp.acceptance.runner import SKIP_CANCELLED, ZERO_TEST_REASON, display_reason

    monkeypatch.setenv("TIANSHU_MCP_LOCALE", "zh-CN")
    exc = git_failed(["status", "--porcelain"], "/p", GitResult(128, "", "fatal: detected dubious ownership", False, 3))
    assert exc.code == ErrorCode.GIT_FAILED
    assert exc.message == "git status --porcelain 在 /p 中失败（退出码 128）：fatal: detected dubious ownership"
    assert ZERO_TEST_REASON == "fail-closed: the command exited 0 but ran no test case"
    assert display_reason(ZERO_TEST_REASON) == "失败即关闭：命令退出码为 0，但没有运行任何测试用例"
    assert display_reason(SKIP_CANCELLED) == "任务已取消，未运行"
    assert display_reason("cannot start command: 'x' (boom)") == "命令无法启动：'x' (boom)"
    assert display_reason("something else") == "something else"
    graded = grade_round(project="/nowhere", task_dir="/nowhere", baseline=Baseline(isRepo=False), check_defs=[],
                         results=[], log_path="/nowhere/verify.log", policy="strict", task_text="",
                         default_timeout_ms=1000, concurrency=1)
    assert graded.report["notes"] == ["已跳过基线评判：项目不是 git 仓库"]
    assert _decide("regressions-only", "failed", "failed", {}, None, None, None, [], "t", "") == (
        False, "基线时同样失败（检查级）")
    monkeypatch.setenv("TIANSHU_MCP_LOCALE", "en")
    assert display_reason(ZERO_TEST_REASON) == ZERO_TEST_REASON


def test_zh_agent_resolution_reasons(monkeypatch: pytest.MonkeyPatch) -> None:
    from tianshu_mcp.adapters.profiles import resolve_profile

    monkeypatch.setenv("TIANSHU_MCP_LOCALE", "zh-CN")
    agent = resolve_profile("nope", None)
    assert not agent.ok and agent.message == "agent 'nope' 未配置；请在 agent-profiles.json 中添加 profile"
    monkeypatch.setenv("TIANSHU_MCP_LOCALE", "en")
    assert resolve_profile("nope", None).message == "agent 'nope' is not configured; add a profile to agent-profiles.json"


# --- the catalogue ---------------------------------------------------------------------------

def test_every_msgid_has_a_chinese_translation_and_the_catalogue_matches_the_source() -> None:
    cat = zh_catalogue()
    entries = [m for m in cat if m.id]
    assert len(entries) > 150
    untranslated = [m.id for m in entries
                    if not (all(m.string) if isinstance(m.string, tuple) else m.string)]
    assert not untranslated, untranslated
    fuzzy = [m.id for m in entries if m.fuzzy]
    assert not fuzzy, fuzzy
    # the .po holds exactly the msgids of a fresh extraction (a new _() string cannot go untranslated,
    # a removed one does not linger), and so does the shipped template
    fresh = {m.id if isinstance(m.id, str) else tuple(m.id) for m in catalogue.extract() if m.id}
    in_po = {m.id if isinstance(m.id, str) else tuple(m.id) for m in entries}
    assert fresh == in_po, {"not in .po": fresh - in_po, "stale in .po": in_po - fresh}
    with (catalogue.LOCALE_DIR / "tianshu_mcp.pot").open("rb") as fh:
        in_pot = {m.id if isinstance(m.id, str) else tuple(m.id) for m in read_po(fh) if m.id}
    assert in_pot == fresh
    assert catalogue.main(["--check"]) == 0


def test_placeholders_of_each_translation_equal_its_msgid() -> None:
    bad = []
    for m in zh_catalogue():
        if not m.id:
            continue
        if isinstance(m.id, tuple):  # plural: every form carries the plural msgid's fields
            expected = fields(m.id[1])
            assert fields(m.id[0]) <= expected
            got = [fields(s) for s in m.string]
        else:
            expected, got = fields(m.id), [fields(m.string)]
        if any(g != expected for g in got):
            bad.append((m.id, m.string))
        # and the translation formats with the msgid's arguments
        for s in (m.string if isinstance(m.string, tuple) else (m.string,)):
            s.format(**{k: "v" for k in expected})
    assert not bad, bad


def test_shipped_mo_equals_a_fresh_compile_of_the_po() -> None:
    po = catalogue.po_path("zh_CN")
    assert po.with_suffix(".mo").read_bytes() == catalogue.compile_mo(po)


def test_catalogue_is_package_data() -> None:
    text = (ROOT / "pyproject.toml").read_text()
    assert '"tianshu_mcp.core" = ["locale/*.pot", "locale/*/LC_MESSAGES/*.po", "locale/*/LC_MESSAGES/*.mo"]' in text
    assert (Path(i18n.__file__).parent / "locale" / "zh_CN" / "LC_MESSAGES" / "tianshu_mcp.mo").is_file()


def test_zh_skill_document_exists_beside_the_english_one() -> None:
    skill = ROOT / "skills" / "tianshu-mcp"
    zh = (skill / "SKILL.zh-CN.md").read_text(encoding="utf-8")
    en = (skill / "SKILL.md").read_text(encoding="utf-8")
    assert HAN.search(zh)
    # every tool the English document names
    for tool in ("run_task", "wait_task", "query_task", "manage_task", "verify_task", "query_info",
                 "prepare_visual_baseline", "approve_visual_baseline"):
        assert (tool in en) <= (tool in zh), tool


# --- a scripted session in zh-CN beside an English one ---------------------------------------

def code_of(result: Any) -> str:
    m = ERROR_RE.match(text_of(result))
    assert m and result.is_error, text_of(result)
    assert result.structured_content["error"]["code"] == m.group(1)
    return m.group(1)


@pytest.mark.anyio
@pytest.mark.usefixtures("ts_daemon")
async def test_scripted_session_in_zh_matches_en_codes_and_keys(ts_home: Path, calc_repo: Path) -> None:
    zh_env = {"TIANSHU_MCP_LOCALE": "zh-CN"}
    async with mcp_client(ts_home, env=zh_env) as zh, mcp_client(ts_home, env={"TIANSHU_MCP_LOCALE": "en"}) as en:
        submitted = await zh.call_tool("run_task", {"projectPath": str(calc_repo), "task": "Fix the bug in add() in calc.py",
                                                    "agentId": "scripted", "autoFixRounds": 1})
        assert not submitted.is_error, text_of(submitted)
        body = text_of(submitted)
        sub = meta_of(submitted)
        assert body.startswith(f"任务已提交：{sub['taskId']}\n"), body
        assert "自动验收: 开，自动返修上限 1 轮" in body and "任务书摘要: Fix the bug" in body
        assert sub["status"] == "queued" and set(sub) >= {"ok", "taskId", "status", "agentId", "projectPath", "message"}
        task_id = sub["taskId"]

        done = await zh.call_tool("wait_task", {"taskId": task_id, "timeoutMs": 180000})
        assert not done.is_error, text_of(done)
        assert text_of(done).startswith("任务已到停点（等待 "), text_of(done)
        assert "状态: [PASS] 任务成功（已用 2 轮" in text_of(done) and "下一步：用 query_info" in text_of(done)
        meta_zh = meta_of(done)
        assert meta_zh["status"] == "succeeded" and meta_zh["waitSettled"] is True
        # the flow run wrote its own text in Chinese: the final message (the task's lastMessage,
        # composed in the flow-run process from the verdict and the acceptance engine's message)
        assert meta_zh["message"].startswith("任务完成：验收通过（report-1，agent 共执行 2 轮；agent "), meta_zh["message"]
        assert meta_zh["message"].endswith("验收通过。"), meta_zh["message"]

        # the same task read in both languages: identical meta (keys, order and values) and structuredContent
        heads = {"query_task": ("状态: [PASS] 任务成功（已用 2 轮", "status: [PASS] task succeeded (2 rounds used"),
                 "wait_task": ("任务已到停点（等待 ", "task reached a stop point (waited "),
                 "query_info": ("任务列表（1 条，列: taskId / status / agent / project / 任务摘要）\n",
                                "tasks (1; columns: taskId / status / agent / project / brief)\n")}
        for tool, args in (("query_task", {"taskId": task_id}), ("wait_task", {"taskId": task_id}),
                           ("query_info", {"type": "tasks", "projectPath": str(calc_repo)})):
            a, b = await zh.call_tool(tool, args), await en.call_tool(tool, args)
            assert not a.is_error and not b.is_error, (text_of(a), text_of(b))
            ma, mb = meta_of(a), meta_of(b)
            assert list(ma) == list(mb), tool
            assert set(a.structured_content) == set(b.structured_content), tool
            ma.pop("waitedMs", None), mb.pop("waitedMs", None)
            if tool == "query_info":
                assert (ma.pop("message"), mb.pop("message")) == ("共 1 条", "1 task(s)")
            assert ma == mb, tool
            assert text_of(a).startswith(heads[tool][0]) and text_of(b).startswith(heads[tool][1]), (text_of(a), text_of(b))
        qa = text_of(await zh.call_tool("query_task", {"taskId": task_id}))
        assert "\n最近消息: " in qa and "--- agent 日志尾部（" in qa
        # event details written by the flow run (recentEvents): the original's wording
        assert "第 0 轮验收失败，进入第 1 轮自动返修" in qa and "第 1 轮：任务书已交给 scripted" in qa, qa
        # the task's flow run adopted the submitting host's environment (core.childenv), locale included:
        # its reports are Chinese too, with the same structure
        report = text_of(await zh.call_tool("query_info", {"type": "report", "taskId": task_id}))
        assert report.startswith("# 验收报告 — 第 1 轮\n"), report[:300]
        assert "## 命令检查" in report and "- 结论：**[PASS]**" in report and "[PASS] pytest" in report
        page = (TaskStore(ts_home).dir(task_id) / "report-1.html").read_text(encoding="utf-8")
        assert '<html lang="zh-CN">' in page and "<h2>命令检查</h2>" in page and "<th>状态</th>" in page

        # errors: the same [CODE] and structuredContent keys, the message after the code in Chinese
        cases: list[tuple[str, dict[str, Any], str, str]] = [
            ("query_task", {"taskId": "tsk_20000101000000_abcdef"}, ErrorCode.TASK_NOT_FOUND.value,
             "任务不存在: tsk_20000101000000_abcdef"),
            ("run_task", {"projectPath": "relative/dir", "task": "x"}, ErrorCode.PATH_NOT_ABSOLUTE.value,
             "projectPath 必须是绝对路径，收到: relative/dir"),
            ("run_task", {"projectPath": str(calc_repo), "task": "x", "autoFixRounds": 11},
             ErrorCode.INVALID_ARGUMENT.value, "参数不合法（run_task）— autoFixRounds: "),
            ("wait_task", {}, ErrorCode.INVALID_ARGUMENT.value,
             "必须且只能提供 taskId（单任务模式）或 taskIds（批量模式）之一——本次两者都没给。"),
            ("manage_task", {"taskId": task_id, "action": "cancel", "message": "m"}, ErrorCode.INVALID_ARGUMENT.value,
             "action=cancel 不接受参数: message（该分支允许: taskId, action, reason）"),
            ("cancel_task", {"taskId": task_id}, ErrorCode.UNKNOWN_TOOL.value, "工具 cancel_task 不存在"),
            # an agent argument gate of the adapters layer (10-tools §1.3, the original's wording)
            ("run_task", {"projectPath": str(calc_repo), "task": "x", "agentId": "scripted", "allowCreateProject": True},
             ErrorCode.INVALID_ARGUMENT.value, "allowCreateProject 是 ZCode 专用参数，agent 'scripted' 不支持；请移除该参数后重试"),
        ]
        for tool, args, code, zh_text in cases:
            a, b = await zh.call_tool(tool, args), await en.call_tool(tool, args)
            assert code_of(a) == code_of(b) == code, (text_of(a), text_of(b))
            assert text_of(a).startswith(f"Error: [{code}] {zh_text}"), text_of(a)
            assert not HAN.search(text_of(b)), text_of(b)
            assert set(a.structured_content["error"]) == set(b.structured_content["error"]) == {"code", "message"}
            assert "---tianshu-mcp-meta---" not in text_of(a)


@pytest.mark.anyio
@pytest.mark.usefixtures("ts_daemon")
async def test_unknown_locale_of_a_server_falls_back_to_en(ts_home: Path) -> None:
    async with mcp_client(ts_home, env={"TIANSHU_MCP_LOCALE": "xx"}) as client:
        result = await client.call_tool("query_task", {"taskId": "tsk_20000101000000_fedcba"})
    assert text_of(result) == "Error: [TASK_NOT_FOUND] task not found: tsk_20000101000000_fedcba"
    log = (ts_home / "logs" / "server.log").read_text(encoding="utf-8", errors="replace")
    assert "unknown locale 'xx' in TIANSHU_MCP_LOCALE; using 'en'" in log
