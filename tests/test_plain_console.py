"""Prefect's console log lines in our processes go through core/log.PlainConsoleHandler (set by
deployments/topology.FORCED_ENV through Prefect's own logging-config override), not through Rich
(design note 77): the same text in a file or a pipe, without the rendering's cost."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from typing import Any

from tianshu_mcp.deployments.topology import FORCED_ENV

SCRIPT = r"""
import logging
from prefect.logging import get_logger
from prefect.logging.configuration import ensure_logging_setup
ensure_logging_setup()  # as an engine or the service does: logging.yml with the environment's overrides
print(",".join(type(h).__name__ for h in logging.getLogger().handlers))
get_logger("tianshu.check").warning("flow run %s is %s", "'calm-otter'", "[ok] :smile: " + "x" * 200)
"""


def _run(env_extra: dict[str, str]) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_LOGGING")}
    env.update(env_extra)
    return subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=120)


def test_our_processes_write_prefects_console_lines_as_prefects_handler_would() -> None:
    key = "PREFECT_LOGGING_HANDLERS_CONSOLE_CLASS"
    assert FORCED_ENV[key] == "tianshu_mcp.core.log.PlainConsoleHandler"
    ours = _run({key: FORCED_ENV[key], "PREFECT_LOGGING_COLORS": "false"})
    rich = _run({"PREFECT_LOGGING_COLORS": "false"})
    assert ours.returncode == 0 and rich.returncode == 0, ours.stderr + rich.stderr
    assert ours.stdout.strip() == "PlainConsoleHandler" and rich.stdout.strip() == "PrefectConsoleHandler"

    def line(out: str) -> str:
        found = [ln for ln in out.splitlines() if "tianshu.check" in ln]
        assert len(found) == 1, out  # one line, not wrapped
        return re.sub(r"^\d\d:\d\d:\d\d\.\d{3}", "<time>", found[0])

    assert line(ours.stderr) == line(rich.stderr).replace("😄", ":smile:")  # Rich alone turns codes into emoji
    assert line(ours.stderr).endswith("[ok] :smile: " + "x" * 200)  # no markup, no emoji, no wrapping
    assert "Traceback" not in ours.stderr


def test_a_bad_log_call_is_reported_and_a_closed_stream_is_not(capsys: Any) -> None:
    """Only a write to a stream closed at a process's end is dropped; a line that cannot be
    formatted is reported as logging reports it, never swallowed."""
    import io
    import logging

    from tianshu_mcp.core.log import PlainConsoleHandler

    stream = io.StringIO()
    handler = PlainConsoleHandler(stream, styles={"log.info_level": "cyan"})
    logger = logging.getLogger("tianshu-test-plain-console")
    logger.propagate = False
    logger.addHandler(handler)
    try:
        logger.warning("progress 50%z done %s", "a")
        assert "--- Logging error ---" in capsys.readouterr().err
        stream.close()
        logger.warning("after the stream closed")
        assert capsys.readouterr().err == ""
    finally:
        logger.removeHandler(handler)
