"""A round's report artifacts are published beside the flow, not on its way from the checks to
the verdict (tasks/verify.publish_report_artifacts, design note 77), and the flow joins them
before it returns, so every artifact belongs to a run that is still running."""

from __future__ import annotations

import contextvars
import threading
from pathlib import Path
from typing import Any

import pytest

from tianshu_mcp.tasks import verify as tv

RUN: contextvars.ContextVar[str] = contextvars.ContextVar("run", default="none")


def test_the_round_goes_on_while_its_artifacts_are_published_and_the_flow_joins_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    release = threading.Event()
    made: list[tuple[str, str, str]] = []

    def slow(kind: str) -> Any:
        def create(**kwargs: Any) -> None:
            assert release.wait(60)
            made.append((kind, kwargs["key"], RUN.get()))
            if kind == "table":
                raise ConnectionError("the API went away")  # a view: never fails the round
        return create

    monkeypatch.setattr(tv, "create_markdown_artifact", slow("markdown"))
    monkeypatch.setattr(tv, "create_table_artifact", slow("table"))
    md = tmp_path / "report-1.md"
    md.write_text("# Report\n", encoding="utf-8")
    report = {"round": 1, "verdict": "passed", "checks": [{"name": "tests", "passed": True, "durationMs": 5}]}
    token = RUN.set("flow-run-context")
    try:
        tv.publish_report_artifacts("tsk_Abc", report, md)  # returns while both calls still wait
    finally:
        RUN.reset(token)
    assert made == []
    release.set()
    tv.join_artifacts(60)
    assert sorted(made) == [("markdown", "tsk-abc-report-1", "flow-run-context"),
                            ("table", "tsk-abc-checks-1", "flow-run-context")]
    assert tv._PUBLISHING == []


def test_a_report_file_that_cannot_be_read_still_gets_its_checks_table(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[str] = []
    monkeypatch.setattr(tv, "create_markdown_artifact", lambda **kw: made.append("markdown"))
    monkeypatch.setattr(tv, "create_table_artifact", lambda **kw: made.append("table"))
    tv.publish_report_artifacts("tsk_Abc", {"round": 0, "checks": []}, tmp_path / "missing.md")
    tv.join_artifacts(60)
    assert made == ["table"]
