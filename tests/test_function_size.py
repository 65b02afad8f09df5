"""Function size: no function in :data:`CHECKED_PATHS` is longer than :data:`MAX_FUNCTION_LINES`
lines, counted from its ``def`` line to its last line (decorators excluded; a nested function
counts within its parent and on its own). A long sequence of steps gets named steps instead.

Pure ``ast`` over the source files: nothing is imported or run.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

MAX_FUNCTION_LINES = 80

CHECKED_PATHS: tuple[str, ...] = (
    "flows",
    "tasks",
    "acceptance/engine",
    "acceptance/git/changes",
    "core/git",
    "acceptance/signals",
    "acceptance/check_result.py",
    "acceptance/runner.py",
    "acceptance/report.py",
    "acceptance/repair.py",
    "acceptance/integrity/judge.py",
    "acceptance/integrity/pycache.py",
)
"""Files, or directories (every ``*.py`` below them), relative to the repository root: the
verification engine, the change analysis and the signals (each once one module, now a package),
the check runner, the reports, the repair plan and the integrity judge. Extend with ``flows/``,
``tasks/`` … as they are brought under the limit."""


def python_files(paths: tuple[str, ...] = CHECKED_PATHS) -> list[Path]:
    """The ``*.py`` files of ``paths`` (a directory: recursively), sorted."""
    out: list[Path] = []
    for rel in paths:
        p = ROOT / rel
        out.extend(sorted(p.rglob("*.py")) if p.is_dir() else [p])
    return out


def long_functions(source: str, limit: int = MAX_FUNCTION_LINES) -> list[tuple[str, int, int]]:
    """``(qualified name, def line, lines)`` of each function or method of ``source`` longer than
    ``limit`` lines (``def`` line to last line, decorators excluded)."""
    found: list[tuple[str, int, int]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = f"{prefix}{child.name}"
                length = (child.end_lineno or child.lineno) - child.lineno + 1
                if length > limit:
                    found.append((name, child.lineno, length))
                visit(child, f"{name}.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            else:
                visit(child, prefix)

    visit(ast.parse(source), "")
    return found


def test_checked_paths_exist() -> None:
    missing = [rel for rel in CHECKED_PATHS if not (ROOT / rel).exists()]
    assert not missing, f"CHECKED_PATHS names paths that do not exist: {missing}"
    assert all(python_files((rel,)) for rel in CHECKED_PATHS)


def test_no_function_is_longer_than_the_limit() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}:{line} {name} ({length} lines)"
        for path in python_files()
        for name, line, length in long_functions(path.read_text(encoding="utf-8"))
    ]
    assert not offenders, (
        f"{len(offenders)} function(s) over {MAX_FUNCTION_LINES} lines (def to last line): name the steps\n  "
        + "\n  ".join(offenders)
    )


@pytest.mark.parametrize("body_lines, expected", [(3, []), (4, [("C.m", 4, 5)])])
def test_the_measure_excludes_decorators_and_names_methods(body_lines: int, expected: list[tuple[str, int, int]]) -> None:
    source = "class C:\n    @staticmethod\n    @property\n    def m():\n" + "        x = 1\n" * body_lines
    assert long_functions(source, limit=4) == expected


def test_nested_functions_are_measured_on_their_own() -> None:
    source = "def outer():\n    def inner():\n" + "        x = 1\n" * 5 + "    return inner\n"
    assert long_functions(source, limit=5) == [("outer", 1, 8), ("outer.inner", 2, 6)]
