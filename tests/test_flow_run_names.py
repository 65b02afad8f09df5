"""A flow run's name says what the task is (core/submissions.flow_run_name): a newcomer's list of
runs in the Prefect UI showed task ids only, and a tester's brief was cut inside a word."""

from __future__ import annotations

from tianshu_mcp.core.submissions import FLOW_RUN_NAME_BRIEF, flow_run_name


def test_the_id_the_project_and_the_brief_s_first_line_cut_at_a_word() -> None:
    brief = "Fix the encoding helpers in itsdangerous: bytes_to_int: the tests fail on odd lengths\nmore detail"
    name = flow_run_name("tsk_20261205000000_abcdef", "/work/itsdangerous", brief)
    assert name == "tsk_20261205000000_abcdef · itsdangerous · Fix the encoding helpers in itsdangerous: bytes_to_int: the…"
    assert len(name.split(" · ")[2]) <= FLOW_RUN_NAME_BRIEF
    # a brief quoting a long path is cut after one of its "/", not inside a name (a second tester)
    path_brief = "Make the failing tests in tests/test_itsdangerous/test_encoding.py pass"
    assert flow_run_name("t", "/p", path_brief) == "t · p · Make the failing tests in tests/test_itsdangerous/…"


def test_repositories_long_words_blank_lines_and_nothing_to_add() -> None:
    assert flow_run_name("tsk_1", "https://host/x/repo.git", "short") == "tsk_1 · repo · short"
    assert flow_run_name("tsk_1", "/a/b/", "x" * 100) == "tsk_1 · b · " + "x" * (FLOW_RUN_NAME_BRIEF - 1) + "…"
    assert flow_run_name("tsk_1", None, "\n\n  a   b \n c") == "tsk_1 · a b"  # the first non-blank line, folded
    assert flow_run_name("vfy_1", "/", "") == "vfy_1"
