"""Reading what real agent CLIs print (docs/real-agents.md §3–§4): the recorded output of the real releases
(tests/data/agent_streams/, recorded against the scripted model endpoint) read into typed events,
the retry-loop rule and stall detection, ANSI codes out of quoted lines."""

from __future__ import annotations

from pathlib import Path

import pytest

from tianshu_mcp.adapters.output.ansi import strip_ansi
from tianshu_mcp.adapters.output.events import FinalMessage, GaveUp, ModelRetry, ToolUse, Usage, UsageTotals
from tianshu_mcp.adapters.output.formats import OutputReader, read_text_line
from tianshu_mcp.adapters.output.liveness import Liveness

STREAMS = Path(__file__).parent / "data" / "agent_streams"


def read_all(name: str, output_format: str | None) -> list[object]:
    reader = OutputReader(output_format)
    return [ev for line in (STREAMS / name).read_text().splitlines() for ev in reader.read(line)]


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_claude_stream_json_success_gives_the_edit_the_totals_and_the_final_message() -> None:
    events = read_all("claude-success.jsonl", "claude-stream-json")
    tools = [e for e in events if isinstance(e, ToolUse)]
    assert [(t.name, t.files) for t in tools] == [("Edit", ("/tmp/rec/proj/calc.py",))]
    usage = [e for e in events if isinstance(e, Usage)]
    assert usage and usage[-1].total and usage[-1].input_tokens == 2400 and usage[-1].output_tokens == 160
    assert usage[-1].cost_usd == pytest.approx(0.0128)
    assert [e.text for e in events if isinstance(e, FinalMessage)] == ["Fixed add."]
    assert not [e for e in events if isinstance(e, (ModelRetry, GaveUp))]


@pytest.mark.parametrize("name,status", [("claude-401.jsonl", 401), ("claude-429.jsonl", 429)])
def test_claude_stream_json_retries_carry_the_status(name: str, status: int) -> None:
    retries = [e for e in read_all(name, "claude-stream-json") if isinstance(e, ModelRetry)]
    assert len(retries) >= 3 and {r.status for r in retries} == {status}
    assert retries[0].attempt == 1 and str(status) in retries[0].line


def test_claude_gave_up_line_is_the_clis_own_words() -> None:
    gave_up = [e for e in read_all("claude-401-gave-up.jsonl", "claude-stream-json") if isinstance(e, GaveUp)]
    assert gave_up == [GaveUp("Invalid API key · Fix external API key", 401)]


def test_a_non_json_line_of_a_structured_cli_is_read_as_text() -> None:
    reader = OutputReader("claude-stream-json")
    assert reader.read("Attempt 2 failed with status 429. Retrying with backoff...") == [
        ModelRetry(429, "Attempt 2 failed with status 429. Retrying with backoff...", attempt=2)]
    assert reader.read("{not json") == []
    assert reader.read('{"type": "assistant", "message": {"content": "oops"}}') == []


def test_usage_totals_replace_and_per_call_figures_add() -> None:
    totals = UsageTotals()
    assert totals.to_json() is None
    totals.add(Usage(10, 2, 0.5))
    totals.add(Usage(5, 1, None))
    assert totals.to_json() == {"inputTokens": 15, "outputTokens": 3, "costUsd": 0.5}
    totals.add(Usage(100, 20, 1.0, total=True))
    assert totals.to_json() == {"inputTokens": 100, "outputTokens": 20, "costUsd": 1.0}


def test_ansi_codes_are_removed() -> None:
    raw = "\x1b[91m\x1b[1mError: \x1b[0mProviderAuthError \x1b]8;;http://x\x07link\x1b]8;;\x07"
    assert strip_ansi(raw) == "Error: ProviderAuthError link"
    assert read_text_line(strip_ansi("\x1b[31mAttempt 1 failed with status 401. Retrying\x1b[0m"))[0].status == 401


def test_a_retry_loop_on_401_ends_at_the_third_retry() -> None:
    clock = Clock()
    live = Liveness(max_retries=3, window_ms=20_000, clock=clock)
    for n in (1, 2):
        live.saw(ModelRetry(401, f"retry {n}", n))
        clock.now += 1
        assert live.stuck() is None
    live.saw(ModelRetry(401, "retry 3", 3))
    stuck = live.stuck()
    assert stuck is not None and stuck.line == "retry 3" and stuck.status == 401 and stuck.retries == 3


def test_a_slow_429_loop_ends_when_its_window_has_passed() -> None:
    clock = Clock()
    live = Liveness(max_retries=10, window_ms=20_000, clock=clock)
    live.saw(ModelRetry(429, "Attempt 1 failed with status 429"))
    clock.now += 19.9
    assert live.stuck() is None
    clock.now += 0.2
    assert live.stuck() is not None


def test_server_errors_and_lost_connections_are_left_to_the_cli() -> None:
    clock = Clock()
    live = Liveness(max_retries=1, window_ms=1000, clock=clock)
    for status in (500, 503, None):
        live.saw(ModelRetry(status, "overloaded"))
    clock.now += 60
    assert live.stuck() is None


def test_silence_is_reported_once_per_stretch() -> None:
    clock = Clock()
    live = Liveness(stall_after_ms=30_000, clock=clock)
    live.activity("working on calc.py")
    clock.now += 29
    assert not live.stalled()
    clock.now += 2
    assert live.stalled() and not live.stalled()
    assert live.last_line == "working on calc.py"
    live.activity("more")
    clock.now += 31
    assert live.stalled()


@pytest.mark.parametrize("name,tool,files", [
    ("codex-success-patch.jsonl", "apply_patch", ("/tmp/rec/proj/calc.py",)),
    ("codex-success-exec.jsonl", "shell", ()),
])
def test_codex_json_success(name: str, tool: str, files: tuple[str, ...]) -> None:
    events = read_all(name, "codex-json")
    tools = [e for e in events if isinstance(e, ToolUse)]
    assert [(t.name, t.files) for t in tools] == [(tool, files)]
    assert [e.text for e in events if isinstance(e, FinalMessage)] == ["Fixed add."]
    assert sum(e.input_tokens for e in events if isinstance(e, Usage)) == 2400
    assert not [e for e in events if isinstance(e, (ModelRetry, GaveUp))]  # the metadata warning is no failure


@pytest.mark.parametrize("name,status,words", [
    ("codex-401.jsonl", 401, "Incorrect API key provided"),
    ("codex-429.jsonl", 429, "exceeded retry limit, last status: 429"),
])
def test_codex_json_retries_and_gives_up_with_its_own_line(name: str, status: int, words: str) -> None:
    events = read_all(name, "codex-json")
    retries = [e for e in events if isinstance(e, ModelRetry)]
    assert [r.attempt for r in retries] == [1, 2, 3, 4, 5] and {r.status for r in retries} == {status}
    gave_up = [e for e in events if isinstance(e, GaveUp)]
    assert len(gave_up) == 1 and gave_up[0].status == status and words in gave_up[0].line


@pytest.mark.parametrize("name,fmt,tools", [
    ("qwen-success.jsonl", "qwen-stream-json", ["read_file", "edit"]),
    ("opencode-success.jsonl", "opencode-json", ["read", "edit"]),
])
def test_qwen_and_opencode_success(name: str, fmt: str, tools: list[str]) -> None:
    events = read_all(name, fmt)
    assert [(e.name, e.files) for e in events if isinstance(e, ToolUse)] == [(t, ("/tmp/rec/proj/calc.py",)) for t in tools]
    assert [e.text for e in events if isinstance(e, FinalMessage)] == ["Fixed add."]
    totals = UsageTotals()
    for e in events:
        if isinstance(e, Usage):
            totals.add(e)
    assert (totals.input_tokens, totals.output_tokens) in ((3600, 240),)
    assert not [e for e in events if isinstance(e, (ModelRetry, GaveUp))]


@pytest.mark.parametrize("name,fmt", [("qwen-401.jsonl", "qwen-stream-json"), ("opencode-401.jsonl", "opencode-json")])
def test_qwen_and_opencode_401_give_up_with_their_own_line(name: str, fmt: str) -> None:
    gave_up = [e for e in read_all(name, fmt) if isinstance(e, GaveUp)]
    assert len(gave_up) == 1 and gave_up[0].status == 401 and "Incorrect API key provided" in gave_up[0].line


def test_an_announced_wait_past_the_window_ends_the_round_at_once() -> None:
    line = "Retrying in 60s (attempt 1/10): [API Error: 429 Rate limit reached for requests. Please try again in 20s.]"
    [retry] = read_text_line(line)
    assert retry.status == 429 and retry.delay_ms == 60_000
    live = Liveness(max_retries=3, window_ms=20_000, clock=Clock())
    live.saw(retry)
    assert live.stuck() is not None


def test_aider_text_output_its_429_retries_and_its_401_line() -> None:
    retries = [e for e in read_all("aider-429.log", None) if isinstance(e, ModelRetry)]
    assert len(retries) >= 3 and {r.status for r in retries} == {429}  # one per attempt, not per "Retrying in"
    from tianshu_mcp.adapters.fatal import fatal_line
    from tianshu_mcp.adapters.profiles import builtin_profiles

    patterns = builtin_profiles()["aider"].fatal_patterns
    assert fatal_line((STREAMS / "aider-401.log").read_text(), patterns) == (
        "The API provider is not able to authenticate you. Check your API key.")
    assert "rate limited you" in (fatal_line((STREAMS / "aider-429.log").read_text(), patterns) or "")


def test_opencode_429_gives_up_with_its_status() -> None:
    assert read_all("opencode-429.jsonl", "opencode-json") == [
        GaveUp("Rate limit reached for requests. Please try again in 20s.", 429)]


@pytest.mark.parametrize("raw,field", [
    ({"outputFormat": "nope"}, "outputFormat"),
    ({"testedVersions": "not a spec!!"}, "testedVersions"),
    ({"nodeVersions": ">>22"}, "nodeVersions"),
    ({"ownedPaths": ["*"]}, "ownedPaths"),
    ({"ownedPaths": ["**"]}, "ownedPaths"),
    ({"ownedPaths": ["../x"]}, "ownedPaths"),
    ({"ownedPaths": ["/etc/passwd"]}, "ownedPaths"),
    ({"ownedPaths": [""]}, "ownedPaths"),
    ({"exitCodes": {"041": "x"}}, "exitCodes"),
    ({"exitCodes": {"--1": "x"}}, "exitCodes"),
    ({"exitCodes": {"x": "y"}}, "exitCodes"),
    ({"liveness": {"maxRetries": 0}}, "liveness"),
    ({"authSources": [{"env": "A", "file": "b"}]}, "authSources"),
])
def test_bad_cli_facts_are_refused_naming_the_field(raw: dict[str, object], field: str) -> None:
    """A user's profile with a bad field of docs/real-agents.md never loads half-valid (the registry turns the
    ValueError into CONFIG_INVALID naming the field)."""
    from pydantic import ValidationError

    from tianshu_mcp.adapters.profiles import AgentProfile

    with pytest.raises(ValidationError) as err:
        AgentProfile.model_validate(raw)
    assert field in str(err.value)


def test_good_cli_facts_load() -> None:
    from tianshu_mcp.adapters.profiles import AgentProfile

    p = AgentProfile.model_validate({"exitCodes": {"41": "auth", "-9": "killed"}, "ownedPaths": [".aider*", "out/cache/*"],
                                     "testedVersions": "==0.61.*", "nodeVersions": ">=22",
                                     "liveness": {"maxRetries": 5, "windowMs": 30000}})
    assert p.exit_codes["-9"] == "killed" and p.liveness.max_retries == 5


def test_owned_paths_match_the_first_component_or_the_whole_path() -> None:
    from tianshu_mcp.acceptance.git.changes import owned_by_cli

    assert owned_by_cli(".aider.chat.history.md", [".aider*"])
    assert owned_by_cli(".aider.tags.cache.v4/cache.db", [".aider*"])
    assert not owned_by_cli("src/.aider.conf", [".aider*"]) and not owned_by_cli("calc.py", [".aider*"])
    assert owned_by_cli("out/cache/x", ["out/cache/*"]) and not owned_by_cli("out/x", ["out/cache/*"])
