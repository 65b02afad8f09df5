"""Chinese text (docs/host-parity.md §3): the locale setting, the gettext catalogue, and a scripted
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
    assert vis.startswith("## 视觉验收\n") and "- 置信度闸门：命令未提供 confidence，minConfidence 未生效" in vis  # docs/visual.md §10
    assert "### home / desktop [failed]" in vis and "- 提供者命令：judge；命中缓存：否" in vis
    page = visual_html(visual, "/t")
    assert "<h3>视觉验收 — failed</h3>" in page and '<option value="all">全部</option>' in page


def test_zh_git_grading_and_check_reasons(monkeypatch: pytest.MonkeyPatch) -> None:
    """GitFailed quotes git's own words untranslated; check reasons keep their English constants
    (compared by code) and are translated when shown; baseline-grading text for the verdict."""
    from tianshu_mcp.acceptance.git import Baseline, GitResult, git_failed
    from tianshu_mcp.acceptance.grading.grade import _decide, grade_round
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
    assert not agent.ok and agent.message == "未配置 agent 'nope'，请在 agent-profiles.json 中添加 profile"  # docs/tools.md §1.3
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



# --- the original wording of docs/tools.md -----------------------------------------------------

SPEC_TOOLS = ROOT / "docs" / "tools.md"

# msgid → the Chinese text docs/tools.md gives for it. Each row: (msgid, the spec's text exactly as the spec
# writes it — the test finds it in docs/tools.md —, that text with its placeholders normalised to the msgid's
# names (<id> → {taskId}, N → {n}, a "…" or an optional "[…]" tail cut off), and how the catalogue's
# translation must relate to it: "==" equal, "^" starts with it (the spec elides the rest with "…", or we
# append a detail after the spec's wording), "in" contains it). A plural msgid is a (singular, plural)
# tuple; its first form is compared. Spec strings without a message here are listed at the end.
SPEC_WORDING: list[tuple[Any, str, str, str]] = [
    # §1.2 idempotencyKey (core/idempotency.py), run_task's brief
    ("idempotencyKey must not be blank", "idempotencyKey 不能为空白", "idempotencyKey 不能为空白", "=="),
    ("idempotencyKey is too long (max 128 characters)", "idempotencyKey 过长（上限 128 字符）",
     "idempotencyKey 过长（上限 128 字符）", "=="),
    ("idempotencyKey must not contain control characters", "idempotencyKey 不允许控制字符",
     "idempotencyKey 不允许控制字符", "=="),
    ("task: the brief must not be blank", "task 任务书不能为空", "task 任务书不能为空", "=="),
    # §1.3 handler rejections
    ("{branch} does not accept: {keys} (allowed: {allowed})",
     '<branch> 不接受参数: <k1, k2>（该分支允许: <allowed list joined ", ">）',
     "{branch} 不接受参数: {keys}（该分支允许: {allowed}）", "=="),
    ("action=continue needs a non-empty message", "action=continue 需要非空的 message（原 continue_task 的必填参数）。",
     "action=continue 需要非空的 message（原 continue_task 的必填参数）。", "=="),
    ("type=report needs a non-empty taskId", "type=report 需要非空的 taskId（原 get_task_report 的必填参数）。",
     "type=report 需要非空的 taskId（原 get_task_report 的必填参数）。", "=="),
    # "本次两者都没给" / "…——本次两者都给了" is {which} (the two rows after it; composed below)
    ("give exactly one of taskId (single) or taskIds (batch); {which}",
     "必须且只能提供 taskId（单任务模式）或 taskIds（批量模式）之一——本次两者都没给。",
     "必须且只能提供 taskId（单任务模式）或 taskIds（批量模式）之一——{which}。", "=="),
    ("neither was given", "本次两者都没给", "本次两者都没给", "=="),
    ("both were given", "…——本次两者都给了。", "本次两者都给了", "=="),
    # <path>: <msg>[; …] is {detail}
    ("acceptanceOverride invalid — {detail}", "acceptanceOverride 参数不合法 — <path>: <msg>[; …]",
     "acceptanceOverride 参数不合法 — {detail}", "=="),
    ("project registration failed, nothing dispatched: {detail}", "项目登记失败，未派单：<msg>", "项目登记失败，未派单：{detail}", "=="),
    ("agent '{agentId}' is not available: {reason}", "agent '<id>' 当前不可用：<reason>",
     "agent '{agentId}' 当前不可用：{reason}", "=="),
    # {file} is agent-profiles.json
    ("agent '{agentId}' is not configured; add a profile to {file}", "未配置 agent '<id>'，请在 agent-profiles.json 中添加 profile",
     "未配置 agent '{agentId}'，请在 {file} 中添加 profile", "=="),
    ("allowCreateProject is ZCode-only; agent '{agentId}' does not support it. Remove it and retry.",
     "allowCreateProject 是 ZCode 专用参数，agent '<id>' 不支持；请移除该参数后重试",
     "allowCreateProject 是 ZCode 专用参数，agent '{agentId}' 不支持；请移除该参数后重试", "=="),
    ("{vendor} does not support the mode parameter; remove mode and retry.",
     "<ZCode|Codex|Kimi Code|MiniMax Code> 不支持 mode 参数；请移除 mode 后重试", "{vendor} 不支持 mode 参数；请移除 mode 后重试", "=="),
    ("modelSource is a Qoder CN-only parameter", "modelSource 是 Qoder CN 专用参数", "modelSource 是 Qoder CN 专用参数", "=="),
    # the spec elides the tail; ours names the alias given and the portable levels there
    ("the reasoning level alias '{level}' is only supported by the Qoder CN adapter; use low, medium, high or max",
     "该思考等级别名仅由 Qoder CN 适配器支持；…", "该思考等级别名仅由 Qoder CN 适配器支持；", "^"),
    ("designDirection is an Open Design-only parameter", "designDirection 是 Open Design 专用参数",
     "designDirection 是 Open Design 专用参数", "=="),
    ("contextWindow is a MiniMax Code-only parameter", "contextWindow 是 MiniMax Code 专用参数",
     "contextWindow 是 MiniMax Code 专用参数", "=="),
    ("agent '{agentId}' needs projectPath; project-less dispatch is only supported for ZCode (its default workspace). "
     "Give projectPath or use agentId=zcode.",
     "agent '<id>' 需要 projectPath；无项目派发当前仅支持 ZCode（default 工作区）。请提供 projectPath 或改用 agentId=zcode。",
     "agent '{agentId}' 需要 projectPath；无项目派发当前仅支持 ZCode（default 工作区）。请提供 projectPath 或改用 agentId=zcode。", "=="),
    ("project-less dispatch does not support autoVerify=true: there is no project to verify",
     "无项目模式不支持 autoVerify=true：…", "无项目模式不支持 autoVerify=true：", "^"),
    ("project-less dispatch does not support autoFixRounds>0: without verification there is nothing to rework",
     "无项目模式不支持 autoFixRounds>0：…", "无项目模式不支持 autoFixRounds>0：", "^"),
    ("project-less dispatch does not support acceptanceOverride: there is no project to verify",
     "无项目模式不支持 acceptanceOverride：…", "无项目模式不支持 acceptanceOverride：", "^"),
    ("project-less dispatch does not support dryRun: there is no project to plan against",
     "无项目模式不支持 dryRun：…", "无项目模式不支持 dryRun：", "^"),
    ("baselineRef '{ref}' is not a valid git ref (project {project})", "baselineRef '<ref>' 不是有效 Git ref（项目 <norm>）。",
     "baselineRef '{ref}' 不是有效 Git ref（项目 {project}）。", "=="),
    ("task not found: {taskId}", "任务不存在: <id>", "任务不存在: {taskId}", "=="),
    ("task {taskId} has no saved pre-work baseline (it never started); give baselineRef or verify by projectPath",
     "任务 <id> 没有保存的动工前基线…", "任务 {taskId} 没有保存的动工前基线", "^"),
    ("verify_task needs taskId or projectPath (one of them)", "verify_task 需要 taskId 或 projectPath（二选一）。",
     "verify_task 需要 taskId 或 projectPath（二选一）。", "=="),
    # §2.4 schema failure: the msgid has {tool} (the spec's recommended Python form also names the
    # tool); it sits in brackets before the spec's " — <issues>"
    ("invalid arguments for {tool}: ", "Error: 参数不合法 — <path>: <message>", "参数不合法", "^"),
    # §2.6 non-task metas
    ("empty list", '"空列表"', "空列表", "=="),
    ("{n} task(s)", '"共 N 条"', "共 {n} 条", "=="),
    ("{n} agent(s)", '"共 N 个 agent"', "共 {n} 个 agent", "=="),
    ("wait timed out", 'message:"等待超时"', "等待超时", "=="),
    ("idempotent replay: the verification for this key is still running", "幂等命中：同一 key 的验收正在执行中",
     "幂等命中：同一 key 的验收正在执行中", "=="),
    # §2.7 status phrase and labels ("（…）": the spec elides the bracket's content)
    ("status: {label}", "状态: <label>", "状态: {label}", "=="),
    (("{n} round used", "{n} rounds used"), "（已用 N 轮）", "已用 {n} 轮", "=="),  # inside " ({details})"
    ("queued ({why})", "排队中（…）", "排队中（", "^"),
    ("running (the agent is at work)", "运行中（…）", "运行中（", "^"),
    ("verifying (acceptance checks running)", "验收中（…）", "验收中（", "^"),
    ("reworking (writing the repair plan for the next round)", "返修中（…）", "返修中（", "^"),
    ("[PASS] task succeeded", "[PASS] 任务成功", "[PASS] 任务成功", "=="),
    ("[FAIL] task failed", "[FAIL] 任务失败", "[FAIL] 任务失败", "=="),
    ("[WARN] needs attention (a human should look)", "[WARN] 需要人工介入（…）", "[WARN] 需要人工介入（", "^"),
    ('waiting for the user (resume with manage_task(action="continue"))', '等待用户处理（可用 manage_task(action="continue") 恢复）',
     '等待用户处理（可用 manage_task(action="continue") 恢复）', "=="),
    ("cancelled", "cancelled `已取消`", "已取消", "=="),
    ("interrupted (server restart/exit)", "已中断（server 重启/退出）", "已中断（server 重启/退出）", "=="),
    # §2.7 run_task (new)
    ("task submitted: {taskId}", "任务已提交：<taskId>", "任务已提交：{taskId}", "=="),
    ("agent: {agentId}", "Agent: <id>", "Agent: {agentId}", "=="),
    ("project: {path}", "项目: <norm>", "项目: {path}", "=="),
    (" (resolved through a symlink from {raw})", "（经符号链接解析自 <raw>）", "（经符号链接解析自 {raw}）", "=="),
    ("auto verification: {onoff}", "自动验收: 开|关", "自动验收: {onoff}", "=="),
    ("on", "自动验收: 开", "开", "=="),
    ("off", "自动验收: 开|关", "关", "=="),
    ((", up to {n} automatic rework round", ", up to {n} automatic rework rounds"), "，自动返修上限 N 轮", "，自动返修上限 {n} 轮", "=="),
    (" (no automatic rework)", "（未开启自动返修）", "（未开启自动返修）", "=="),
    ("queue: one task at a time per project + global limit {limit}. ", "队列位置：每项目串行 + 全局并发 <max>。",
     "队列位置：每项目串行 + 全局并发 {limit}。", "=="),
    # ours appends "，或使用 wait_task" after the spec's wording
    ("Poll with query_task({taskId}) every 5-10 s, or wait_task.", "请用 query_task(<id>) 轮询（建议间隔 5–10 秒）。",
     "请用 query_task({taskId}) 轮询（建议间隔 5–10 秒）", "^"),
    ("brief: {brief}", "任务书摘要: <first 120 chars>[…]", "任务书摘要: {brief}", "=="),
    # the spec's "（状态 <s>）" has no field in this msgid (it names the active task only)
    ("note: this project already has an unfinished task {taskId}; this one waits behind it.",
     "提示：该工作区已有未结束任务 <id>（状态 <s>）…", "提示：该工作区已有未结束任务 {taskId}", "^"),
    ("note: the repository has {n} uncommitted change(s); they are part of the baseline and not attributed to the "
     "agent, unless it changes those files too (their whole diff then counts).",
     "注意：该仓库当前有 N 个未提交变更（…）…", "注意：该仓库当前有 {n} 个未提交变更", "^"),
    ("note: the repository has {n} uncommitted change(s); the task's worktree starts at HEAD without them "
     "(commit them first if the agent needs them).", "注意：该仓库当前有 N 个未提交变更（…）…", "注意：该仓库当前有 {n} 个未提交变更", "^"),
    # §2.7 query_task
    ("last message: {message}", "最近消息: …", "最近消息: {message}", "=="),
    ("--- agent log tail ({n} lines) ---", "--- agent 日志尾部（N 行）---", "--- agent 日志尾部（{n} 行）---", "=="),
    ("(no agent log yet)", "（暂无 agent 日志）", "（暂无 agent 日志）", "=="),
    ("--- recent events ({n}, oldest first) ---", "--- 最近事件（N 条，旧 → 新）---", "--- 最近事件（{n} 条，旧 → 新）---", "=="),
    # §2.7 wait_task (S → {secs}; the next-step lines are described, not quoted, by the spec)
    ("task reached a stop point (waited {secs} s): {status}\nnext: {next}", "任务已到停点（等待 S 秒）：<status phrase>",
     "任务已到停点（等待 {secs} 秒）：{status}", "^"),
    ("wait timed out ({secs} s): {status}{clamp}\nthe task is unaffected; call wait_task again to keep waiting.",
     "等待超时（S 秒）：<status>[（timeoutMs 超上限，已钳制到 600000ms）]", "等待超时（{secs} 秒）：{status}{clamp}", "^"),
    (" (timeoutMs above the maximum, clamped to {ms} ms)", "（timeoutMs 超上限，已钳制到 600000ms）",
     "（timeoutMs 超上限，已钳制到 {ms}ms）", "=="),
    ("a task reached a stop point (waited {secs} s): {taskId} — {status}\nnext: {next}\n"
     "all tasks now:\n{listing}", "已有任务到达停点（等待 S 秒）：<id> —— <status>", "已有任务到达停点（等待 {secs} 秒）：{taskId} —— {status}", "^"),
    ("a task reached a stop point (waited {secs} s): {taskId} — {status}\nnext: {next}\n"
     "all tasks now:\n{listing}", "全部任务当前状态：", "\n全部任务当前状态：\n", "in"),
    ("wait timed out ({secs} s): no task reached a stop point yet.{clamp}\ncall wait_task again to keep waiting.\n"
     "all tasks now:\n{listing}", "等待超时（S 秒）：暂无任务到达停点。[clamp note]", "等待超时（{secs} 秒）：暂无任务到达停点。{clamp}", "^"),
    # §2.7 query_info
    ("no task matches.", "没有符合条件的任务。", "没有符合条件的任务。", "=="),
    ("tasks ({n}; columns: taskId / status / agent / project / brief)",
     "任务列表（N 条，列: taskId / status / agent / project / 任务摘要）", "任务列表（{n} 条，列: taskId / status / agent / project / 任务摘要）", "=="),
    ("agents and executable probe results (columns: status / id / name / driver / profileStatus / message)",
     "Agent 适配与可执行探测结果（列: …）", "Agent 适配与可执行探测结果（列: ", "^"),
    ("[PASS] available", "[PASS] 可用|[FAIL] 不可用", "[PASS] 可用", "=="),
    ("[FAIL] unavailable", "[PASS] 可用|[FAIL] 不可用", "[FAIL] 不可用", "=="),
    (" [source: {source}]", "[ [探测来源: <src>]]", " [探测来源: {source}]", "=="),
    # §2.7 manage_task
    ("cancelled {taskId}", '"已取消 <id>。"', "已取消 {taskId}。", "=="),
    ("cancel requested for {taskId}, not final yet after {secs} s; check again with query_task",
     "（尚未落终态：…请稍后 query_task 复核）", "（尚未落终态：", "in"),
    ("cancel requested for {taskId}, not final yet after {secs} s; check again with query_task",
     "（尚未落终态：…请稍后 query_task 复核）", "请稍后 query_task 复核）", "in"),
    ("cancel requested for {taskId} (its worker ends it), not final yet after {secs} s; check again with query_task",
     "（尚未落终态：…请稍后 query_task 复核）", "请稍后 query_task 复核）", "in"),
    ('task {taskId} continued with your answer; it is queued to re-run its round.\ncurrent status: {status}. '
     'Poll with wait_task(taskId="{taskId}").', "任务 <id> 已恢复并重新入队；…", "任务 {taskId} 已恢复并重新入队；", "^"),
    ("task {taskId} re-queued (manual rework)", "任务 <id> 已重新入队（手动返修）", "任务 {taskId} 已重新入队（手动返修）", "=="),
    (", with feedback", "[，带追加指示]", "，带追加指示", "=="),
    (", with a structured repair hint ({n} chars)", "[，带结构化修复提示（N 字符）]", "，带结构化修复提示（{n} 字符）", "=="),
    ("current status: {status}, rounds used {n}.", "当前状态: <status>，已用轮次 N。", "当前状态: {status}，已用轮次 {n}。", "=="),
    ("Poll with query_task({taskId}) for the new round.", "请用 query_task(<id>) 轮询新一轮结果。",
     "请用 query_task({taskId}) 轮询新一轮结果。", "=="),
    # §2.7 verify_task ("[PASS] " is prepended and _(".") appended by the handler: composed below)
    ("manual verification passed (report-{round}): {passed}/{total} checks passed",
     "[PASS] 手动验收通过（reportRound R）：p/n 项检查通过。", "手动验收通过（reportRound {round}）：{passed}/{total} 项检查通过", "=="),
    ("manual verification failed (report-{round}): {n} check(s) did not pass.",
     "[FAIL] 手动验收失败（reportRound R）：k 项检查未通过。", "手动验收失败（reportRound {round}）：{n} 项检查未通过。", "=="),
    ("{n} file(s) changed, diffstat +{add} -{del_}.", "变更 N 个文件，diffstat +A -D。", "变更 {n} 个文件，diffstat +{add} -{del_}。", "=="),
    ("report: {path}", "报告：<md path>", "报告：{path}", "=="),
    ("json: {path}", "JSON：<json path>", "JSON：{path}", "=="),
    # §3.1 projectPath safety gate
    ("projectPath must be an absolute path, got: {path}", "projectPath 必须是绝对路径，收到: <p>", "projectPath 必须是绝对路径，收到: {path}", "=="),
    ("directory does not exist or is not accessible: {path}", "目录不存在或不可访问: <p>", "目录不存在或不可访问: {path}", "=="),
    ("projectPath cannot be the user's home directory itself (the agent could write all of it): {path}",
     "projectPath 不能是用户主目录本身（worker 将可写整个主目录）: <canonical>",
     "projectPath 不能是用户主目录本身（worker 将可写整个主目录）: {path}", "=="),
    ("projectPath is a system or root-level directory (the agent could write the whole subtree); refused: {path}",
     "projectPath 指向系统/根级目录，worker 写权限将覆盖整个子树，已拒绝: <canonical>",
     "projectPath 指向系统/根级目录，worker 写权限将覆盖整个子树，已拒绝: {path}", "=="),
    # §3.2 idempotency
    ("idempotent replay: this idempotencyKey already maps to task {taskId} (no new task).",
     "幂等重放：该 idempotencyKey 已对应任务 <id>（未新建任务）。", "幂等重放：该 idempotencyKey 已对应任务 {taskId}（未新建任务）。", "=="),
    ("poll with query_task({taskId}).", "请用 query_task(<id>) 继续轮询。", "请用 query_task({taskId}) 继续轮询。", "=="),
    # the msgids do not carry the key: the spec's "'<key>' " after "idempotencyKey" is not there
    ("idempotencyKey is already bound to task {taskId} with different arguments; use a new key or the same arguments",
     "已被任务 <id> 占用，但本次参数与首次提交不同。…", "已被任务 {taskId} 占用，但本次参数与首次提交不同。", "in"),
    ("idempotencyKey is already bound to verification {taskId} with different arguments; use a new key or the same arguments",
     "已被验收记录 <id> 占用", "已被验收记录 {taskId} 占用，但本次参数与首次提交不同。", "in"),
    # the record id follows the spec's sentence
    ("the verification for this idempotencyKey is still running (not started again): {taskId}",
     "该 idempotencyKey 对应的验收仍在执行中（未重复执行）。", "该 idempotencyKey 对应的验收仍在执行中（未重复执行）。", "^"),
    ("idempotent replay: this idempotencyKey already maps to verification report-{round} (not re-run).",
     "幂等重放：该 idempotencyKey 已对应第 R 轮验收（未重跑）。", "幂等重放：该 idempotencyKey 已对应第 {round} 轮验收（未重跑）。", "=="),
    # §3.5 query_info(type=report)
    ("task {taskId} has no acceptance report yet (verification off or not run yet)",
     "任务 <id> 还没有验收报告（可能未启用验收或尚未验收）。", "任务 {taskId} 还没有验收报告（可能未启用验收或尚未验收）。", "=="),
    ("round {round} has no report ({path})", "第 R 轮验收报告不存在（<path>）。", "第 {round} 轮验收报告不存在（{path}）。", "=="),
    # §3.6 manage_task; "已取消（排队中）[：reason]": the reason follows the spec's words directly, so
    # our "before its flow run was created" detail is not added in Chinese (it would split them)
    ("cancelled (queued, before its flow run was created)", "已取消（排队中）[：reason]", "已取消（排队中）", "=="),
    ("cancelled ({was})", "已取消（排队中）[：reason]", "已取消（{was}）", "=="),
    (": {reason}", "已取消（排队中）[：reason]", "：{reason}", "=="),
    ("queued", "已取消（排队中）", "排队中", "=="),
    ("task is already final ({status}); nothing to cancel", "任务已处于终态（<s>），无需取消", "任务已处于终态（{status}），无需取消", "=="),
    ("task status is {status}; only a needs_user task can be continued", "任务状态为 <s>，只允许恢复 needs_user",
     "任务状态为 {status}，只允许恢复 needs_user", "=="),
    ("task is still in progress (status={status}); cannot rework", "任务仍在进行中（status=<s>），无法 rework",
     "任务仍在进行中（status={status}），无法 rework", "=="),
    # §4 shutdown ({was} = "queued" → 排队中: composed below)
    ("server exited; the agent process was terminated", "server 退出，进程已终止", "server 退出，进程已终止", "=="),
    ("server exited; {was} task archived", "server 退出，排队中任务已归档", "server 退出，{was}任务已归档", "=="),
]
# Spec strings with no message of ours (so no row): `projectPath 不能为空` (jsonschema's own minLength
# text), `幂等键：<key>（…）。` and `注意：幂等记录写入失败（…）…` (run_task prints neither line),
# `等待被取消…` (a cancelled wait gets no reply: MCP cancellation), `任务 <id> 是无项目模式…`,
# `…不产生项目验收报告…`, `continue_task 当前仅支持 …` and `【结构化修复提示】` (no such branch or
# heading here), `Qoder CN 不支持 mode 参数` (the {vendor} row covers it), the log line
# `tianshu-mcp 已连接（stdio）…` and `tianshu-mcp 启动失败: …` (logs and stderr stay English), and
# the `config acceptance` JSON values (`（默认集）` …: JSON stays identical in every locale).


def _spec_text() -> str | None:
    """docs/tools.md's text (it quotes the original's Chinese strings), or None where it is
    missing: the translations are then checked against the table alone, which quotes it."""
    return SPEC_TOOLS.read_text(encoding="utf-8") if SPEC_TOOLS.is_file() else None


def test_chinese_wording_follows_10_tools_md() -> None:
    spec = _spec_text()
    translations = {m.id if isinstance(m.id, str) else tuple(m.id): m.string for m in zh_catalogue() if m.id}
    missing_in_spec = [raw for _m, raw, _n, _h in SPEC_WORDING if spec is not None and raw not in spec]
    assert not missing_in_spec, missing_in_spec  # the table quotes the spec, not a memory of it
    bad = []
    for msgid, _raw, wording, how in SPEC_WORDING:
        assert msgid in translations, msgid  # the message still exists
        zh = translations[msgid]
        zh = zh[0] if isinstance(zh, tuple) else zh
        assert how in ("==", "^", "in"), how
        ok = zh == wording if how == "==" else zh.startswith(wording) if how == "^" else wording in zh
        if not ok:
            bad.append((msgid, how, wording, zh))
    assert not bad, "\n".join(map(repr, bad))


def test_composed_chinese_lines_read_as_the_spec_gives_them(monkeypatch: pytest.MonkeyPatch) -> None:
    """Lines built from several messages (as mcp_server/ builds them) equal the spec's examples."""
    spec = _spec_text()
    monkeypatch.setenv("TIANSHU_MCP_LOCALE", "zh-CN")
    _, ng = i18n._, i18n.ngettext
    rounds = ng("{n} round used", "{n} rounds used", 2).format(n=2)
    composed = [  # (what mcp_server/ puts together, the spec's text with its placeholders filled, the spec's form)
        (_("status: {label}").format(label=_("[PASS] task succeeded")) + _(" ({details})").format(details=rounds),
         "状态: [PASS] 任务成功（已用 2 轮）", "`状态: <label>` + `（已用 N 轮）`"),
        (_("cancelled (queued, before its flow run was created)") + _(": {reason}").format(reason="r"),
         "已取消（排队中）：r", "已取消（排队中）[：reason]"),
        (_("cancelled ({was})").format(was=_("queued")), "已取消（排队中）", "已取消（排队中）[：reason]"),
        (_("server exited; {was} task archived").format(was=_("queued")), "server 退出，排队中任务已归档",
         "server 退出，排队中任务已归档"),
        (_("give exactly one of taskId (single) or taskIds (batch); {which}").format(which=_("both were given")),
         "必须且只能提供 taskId（单任务模式）或 taskIds（批量模式）之一——本次两者都给了。", "…——本次两者都给了。"),
        (_("auto verification: {onoff}").format(onoff=_("on"))
         + ng(", up to {n} automatic rework round", ", up to {n} automatic rework rounds", 2).format(n=2),
         "自动验收: 开，自动返修上限 2 轮", "`自动验收: 开|关` + (`，自动返修上限 N 轮`"),
        (_("auto verification: {onoff}").format(onoff=_("off")) + _(" (no automatic rework)"),
         "自动验收: 关（未开启自动返修）", "`（未开启自动返修）`"),
        ("[PASS] " + _("manual verification passed (report-{round}): {passed}/{total} checks passed").format(
            round=0, passed=3, total=3) + _("."), "[PASS] 手动验收通过（reportRound 0）：3/3 项检查通过。",
         "[PASS] 手动验收通过（reportRound R）：p/n 项检查通过。"),
        (_("task {taskId} re-queued (manual rework)").format(taskId="tsk_x") + _(", with feedback")
         + _(", with a structured repair hint ({n} chars)").format(n=12) + _("."),
         "任务 tsk_x 已重新入队（手动返修），带追加指示，带结构化修复提示（12 字符）。",
         "任务 <id> 已重新入队（手动返修）[，带追加指示][，带结构化修复提示（N 字符）]。"),
        (_("cancel requested for {taskId}, not final yet after {secs} s; check again with query_task").format(
            taskId="tsk_x", secs=30)[-len("请稍后 query_task 复核）"):], "请稍后 query_task 复核）",
         "[（尚未落终态：…请稍后 query_task 复核）]"),
    ]
    for got, expected, form in composed:
        assert spec is None or form in spec, form
        assert got == expected, (got, expected)
    queue = (_("queue: one task at a time per project + global limit {limit}. ").format(limit=4)
             + _("Poll with query_task({taskId}) every 5-10 s, or wait_task.").format(taskId="tsk_x"))
    assert spec is None or "`队列位置：每项目串行 + 全局并发 <max>。请用 query_task(<id>) 轮询（建议间隔 5–10 秒）。`" in spec
    assert queue.startswith("队列位置：每项目串行 + 全局并发 4。请用 query_task(tsk_x) 轮询（建议间隔 5–10 秒）"), queue

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
            # an agent argument gate of the adapters layer (docs/tools.md §1.3, the original's wording)
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
