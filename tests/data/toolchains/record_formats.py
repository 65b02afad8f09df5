"""Regenerate the recorded machine-readable / parallel test outputs of ``acceptance.toolchains.formats``.

Every ``<toolchain>/<case>.txt`` written here is the real, merged stdout+stderr of one runner on a
tiny project built in a temporary directory, exactly like ``record_runner_outputs.py`` here
(whose :class:`Case`, :func:`run_case` and tool lookup this script reuses). The first line is a
header the parsers must ignore (it also stands for the noise before a report)::

    #% recorded by record_formats.py; tool: <tool and version>; argv: <argv>; exit: <exit code>

Formats recorded: ``go test -json`` (``go/``), ``jest --json`` (``jest/``), ``vitest run
--reporter=json`` (``vitest/``), ``pytest -p xdist -n 2`` (``pytest/``). Files listed in a folder's
README.md as taken from public repositories (newer Go, cargo-nextest) are not touched.

Usage (from the repository root)::

    .venv/bin/python tests/data/toolchains/record_formats.py              # every case
    .venv/bin/python tests/data/toolchains/record_formats.py go vitest    # some toolchains
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
HEADER_PREFIX = "#% recorded by record_formats.py"


def _load_record() -> Any:
    path = HERE / "record_runner_outputs.py"
    spec = importlib.util.spec_from_file_location("runner_outputs_record", path)
    assert spec is not None and spec.loader is not None
    module = sys.modules.get(spec.name)
    if module is None:
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # dataclasses look their module up
        spec.loader.exec_module(module)
    return module


rec = _load_record()
Case = rec.Case

GO_SUBTESTS = {
    "deep/deep_test.go": (
        'package deep\n\nimport "testing"\n\n'
        "func TestTree(t *testing.T) {\n"
        '\tt.Run("a", func(t *testing.T) {\n'
        '\t\tt.Run("x", func(t *testing.T) {})\n'
        '\t\tt.Run("y", func(t *testing.T) { t.Skip("later") })\n'
        "\t})\n"
        '\tt.Run("b", func(t *testing.T) { t.Error("b broke") })\n'
        '\tt.Run("with space", func(t *testing.T) {})\n'
        "}\n\n"
        "func TestParallel(t *testing.T) {\n"
        '\tfor _, n := range []string{"p1", "p2"} {\n'
        "\t\tt.Run(n, func(t *testing.T) { t.Parallel() })\n\t}\n}\n"
    ),
}
GO_PANIC = {
    "boom/boom_test.go": (
        'package boom\n\nimport "testing"\n\n'
        "func TestFine(t *testing.T) {}\n"
        'func TestPanics(t *testing.T) { var m map[string]int; m["x"] = 1 }\n'
        "func TestAfter(t *testing.T) {}\n"
    ),
    "ok/ok_test.go": 'package ok\n\nimport "testing"\n\nfunc TestOk(t *testing.T) {}\n',
}
GO_TIMEOUT = {
    "slow/slow_test.go": (
        'package slow\n\nimport (\n\t"testing"\n\t"time"\n)\n\n'
        "func TestQuick(t *testing.T) {}\n"
        "func TestSlow(t *testing.T) { time.Sleep(30 * time.Second) }\n"
    ),
}
GO_JSON = ("go", "test", "-json")

JEST_CONSOLE = {
    **rec.JEST_PKG,
    "noisy.test.js": (
        "test('logs braces', () => { console.log('{\"numTotalTests\": 99, \"testResults\": []}'); });\n"
        "test('logs more', () => { console.error('{ not json'); });\n"
    ),
}
VITEST_CONSOLE = {
    "package.json": rec.VITEST_PASS["package.json"],
    "noisy.test.js": JEST_CONSOLE["noisy.test.js"],
}
VITEST_NESTED = {
    "package.json": rec.VITEST_PASS["package.json"],
    "tests/unit/sum.test.js": rec.VITEST_PASS["sum.test.js"],
    "tests/other.test.js": rec.JEST_FAIL["other.test.js"],
}

PYTEST_XDIST = ("python", "-m", "pytest", "-p", "no:cacheprovider", "-p", "xdist", "-n", "2")

# (folder, case): the project is a Case's files/argv/setup; ``Case.runner`` picks the version line.
CASES: list[tuple[str, Any]] = [
    ("go", Case("go", "pass", rec.GO_PASS, (*GO_JSON, "./..."), rec.GO_MOD)),
    ("go", Case("go", "fail", rec.GO_FAIL, (*GO_JSON, "./..."), rec.GO_MOD)),
    ("go", Case("go", "subtests", GO_SUBTESTS, (*GO_JSON, "./..."), rec.GO_MOD)),
    ("go", Case("go", "skipped", rec.GO_SKIPPED, (*GO_JSON, "./..."), rec.GO_MOD)),
    ("go", Case("go", "no-test-files", rec.GO_EMPTY, (*GO_JSON, "./..."), rec.GO_MOD)),
    ("go", Case("go", "zero-run", rec.GO_FAIL, (*GO_JSON, "-run", "NothingMatches", "./..."), rec.GO_MOD)),
    ("go", Case("go", "build-error", rec.GO_BUILD_ERROR, (*GO_JSON, "./..."), rec.GO_MOD)),
    ("go", Case("go", "panic", GO_PANIC, (*GO_JSON, "./..."), rec.GO_MOD)),
    ("go", Case("go", "timeout", GO_TIMEOUT, (*GO_JSON, "-timeout", "3s", "./..."), rec.GO_MOD)),
    ("jest", Case("jest", "pass", rec.JEST_PASS, ("jest", "--ci", "--json"))),
    ("jest", Case("jest", "fail", rec.JEST_FAIL, ("jest", "--ci", "--json"))),
    ("jest", Case("jest", "skipped", rec.JEST_SKIPPED, ("jest", "--ci", "--json"))),
    ("jest", Case("jest", "zero", rec.JEST_EMPTY, ("jest", "--ci", "--json"))),
    ("jest", Case("jest", "zero-pass", rec.JEST_EMPTY, ("jest", "--ci", "--json", "--passWithNoTests"))),
    ("jest", Case("jest", "console", JEST_CONSOLE, ("jest", "--ci", "--json"))),
    ("vitest", Case("vitest", "pass", rec.VITEST_PASS, ("vitest", "run", "--globals", "--reporter=json"))),
    ("vitest", Case("vitest", "fail", rec.VITEST_FAIL, ("vitest", "run", "--globals", "--reporter=json"))),
    ("vitest", Case("vitest", "skipped", rec.VITEST_SKIPPED, ("vitest", "run", "--globals", "--reporter=json"))),
    ("vitest", Case("vitest", "zero", rec.VITEST_EMPTY, ("vitest", "run", "--globals", "--reporter=json"))),
    ("vitest", Case("vitest", "zero-pass", rec.VITEST_EMPTY,
                    ("vitest", "run", "--globals", "--reporter=json", "--passWithNoTests"))),
    ("vitest", Case("vitest", "console", VITEST_CONSOLE, ("vitest", "run", "--globals", "--reporter=json"))),
    ("vitest", Case("vitest", "nested", VITEST_NESTED, ("vitest", "run", "--globals", "--reporter=json"))),
    ("pytest", Case("pytest", "xdist-pass-v", rec.PY_PASS, (*PYTEST_XDIST, "-v"))),
    ("pytest", Case("pytest", "xdist-fail-v", rec.PY_FAIL, (*PYTEST_XDIST, "-v"))),
    ("pytest", Case("pytest", "xdist-fail-q", rec.PY_FAIL, (*PYTEST_XDIST, "-q"))),
    ("pytest", Case("pytest", "xdist-fail-ra", rec.PY_FAIL, (*PYTEST_XDIST, "-rA"))),
    ("pytest", Case("pytest", "xdist-skipped-q", rec.PY_SKIPPED, (*PYTEST_XDIST, "-q"))),
    ("pytest", Case("pytest", "xdist-zero-q", rec.PY_EMPTY, (*PYTEST_XDIST, "-q"))),
    ("pytest", Case("pytest", "xdist-collect-error-q", rec.PY_COLLECT_ERROR, (*PYTEST_XDIST, "-q"))),
]


def case_path(folder: str, case: Any) -> Path:
    """Where the recording of ``case`` lives: ``<folder>/<case.name>.txt``."""
    return HERE / folder / f"{case.name}.txt"


def record(folder: str, case: Any) -> Path | None:
    """Run ``case`` and write its recording; None when the tool is missing."""
    if rec.case_tool(case) is None:
        print(f"skip {folder}/{case.name}: {case.argv[0]} not installed", file=sys.stderr)
        return None
    code, text = rec.run_case(case)
    path = case_path(folder, case)
    path.parent.mkdir(parents=True, exist_ok=True)
    head = f"{HEADER_PREFIX}; tool: {rec.tool_version(case)}; argv: {' '.join(case.argv)}; exit: {code}"
    path.write_text(head + "\n" + text, encoding="utf-8")
    print(f"wrote {folder}/{case.name}.txt (exit {code}, {len(text)} chars)", file=sys.stderr)
    return path


def main(argv: list[str]) -> int:
    wanted = set(argv)
    for folder, case in CASES:
        if wanted and folder not in wanted and f"{folder}/{case.name}" not in wanted:
            continue
        record(folder, case)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
