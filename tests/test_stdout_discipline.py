"""The stdio server's stdout is the MCP stream: one stray line breaks the host's JSON-RPC reader.
Printing is the console commands' job (``console/``); below it nothing prints to stdout.

Pure ``ast``: a ``print(...)`` call without ``file=`` (or with ``file=sys.stdout``) in any layer
except ``console/`` fails.
"""

from __future__ import annotations

import ast

from source_scan import offenders

QUIET_LAYERS = ("core", "adapters", "acceptance", "tasks", "flows", "deployments", "hosting", "mcp_server")


def stdout_prints(source: str) -> list[int]:
    """Line numbers of ``print`` calls that write to stdout."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print":
            target = next((k.value for k in node.keywords if k.arg == "file"), None)
            if target is None or ast.unparse(target) == "sys.stdout":
                lines.append(node.lineno)
    return lines


def test_nothing_below_the_console_prints_to_stdout() -> None:
    found = offenders(QUIET_LAYERS, stdout_prints)
    assert not found, "print() to stdout outside console/:\n  " + "\n  ".join(found)


def test_the_scan_tells_stdout_from_stderr() -> None:
    assert stdout_prints("print('x')\nprint('y', file=sys.stdout)") == [1, 2]
    assert stdout_prints("print('x', file=sys.stderr)\nlog.info('print')") == []
