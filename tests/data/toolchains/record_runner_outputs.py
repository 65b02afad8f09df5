"""Regenerate the recorded test-runner outputs that ``tests/test_acceptance_testcount.py`` counts.

Every ``<runner>-<case>.txt`` is the real, merged stdout+stderr of one test runner on a tiny
project built in a temporary directory (the way the check runner sees it: one file, both streams in
arrival order, no TTY). It lives in its toolchain's folder, ``<toolchain id>/<runner>-<case>.txt``
(``node-spec-*``, ``node-tap-*`` and ``node-default-*`` in ``node/``; see :attr:`Case.toolchain`).
The first line is a header the parsers ignore (it keeps the name ``record.py`` this script had
before it moved here from ``tests/data/runner_outputs/``)::

    #% recorded by record.py; tool: <tool and version>; argv: <argv>; exit: <exit code>

The temporary project path is replaced by ``/tmp/proj``; nothing else is edited.

Usage (from the repository root)::

    .venv/bin/python tests/data/toolchains/record_runner_outputs.py            # every runner
    .venv/bin/python tests/data/toolchains/record_runner_outputs.py go cargo   # some runners

Tools: the venv's pytest and unittest, ``node`` (``node --test``), jest / vitest / mocha from
``tests/toolchains/node_modules/.bin``, ``go`` and ``cargo`` (``--offline``, crates without
dependencies). A missing tool is reported and its files are left as they are.

The same :data:`CASES` drive the live tests in ``tests/test_acceptance_testcount.py`` (via
:func:`run_case`), so a newer runner whose output no longer parses like the recording shows up there.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Sequence

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
NODE_BIN = REPO / "tests" / "toolchains" / "node_modules" / ".bin"
HEADER_PREFIX = "#% recorded by record.py"
PROJ = "/tmp/proj"
_HEADER_RE = re.compile(r"^#% recorded by record\.py; tool: (?P<tool>.*?); argv: (?P<argv>.*?); exit: (?P<exit>-?\d+)$")


@dataclass(frozen=True)
class Case:
    """One recording: ``files`` written into an empty project, then ``argv`` run there.

    ``argv[0]`` is a tool key (see :func:`tool_path`); ``setup`` commands run first (their output
    is not recorded).
    """

    runner: str
    name: str
    files: dict[str, str]
    argv: tuple[str, ...]
    setup: tuple[tuple[str, ...], ...] = field(default=())

    @property
    def filename(self) -> str:
        return f"{self.runner}-{self.name}.txt"

    @property
    def toolchain(self) -> str:
        """The toolchain id whose folder holds the recording: ``node`` for the ``node-*`` runners
        (spec, TAP and default reporters of ``node --test``), else the runner itself."""
        return "node" if self.runner.startswith("node-") else self.runner

    @property
    def path(self) -> Path:
        """Where the recording lives: ``tests/data/toolchains/<toolchain>/<runner>-<case>.txt``."""
        return HERE / self.toolchain / self.filename


# --- project contents -------------------------------------------------------------------------

PY_PASS = {
    "tests/test_calc.py": (
        "def add(a, b):\n    return a + b\n\n\n"
        "def test_add():\n    assert add(2, 3) == 5\n\n\n"
        "def test_add_negative():\n    assert add(-2, -3) == -5\n\n\n"
        "class TestMore:\n    def test_zero(self):\n        assert add(0, 0) == 0\n"
    ),
}
PY_FAIL = {
    "tests/test_mixed.py": (
        "import pytest\n\n\n"
        "def test_ok():\n    pass\n\n\n"
        "def test_bad():\n    assert 1 == 2\n\n\n"
        "@pytest.mark.skip(reason='later')\ndef test_skipped():\n    pass\n\n\n"
        "@pytest.fixture\ndef broken():\n    raise RuntimeError('fixture broke')\n\n\n"
        "def test_uses_broken(broken):\n    pass\n\n\n"
        "@pytest.mark.parametrize('x', [1, 2])\ndef test_param(x):\n    assert x == 1\n\n\n"
        "class TestGroup:\n    def test_method(self):\n        pass\n"
    ),
}
PY_SKIPPED = {
    "tests/test_later.py": (
        "import pytest\n\n\n"
        "@pytest.mark.skip(reason='not yet')\ndef test_one():\n    pass\n\n\n"
        "@pytest.mark.skip(reason='not yet')\ndef test_two():\n    pass\n"
    ),
}
PY_COLLECT_ERROR = {
    "tests/test_ok.py": "def test_fine():\n    pass\n",
    "tests/test_broken.py": "def test_broken(:\n    pass\n",
}
PY_EMPTY = {"tests/__init__.py": ""}

UT_PASS = {
    "test_calc.py": (
        "import unittest\n\n\n"
        "class CalcTest(unittest.TestCase):\n"
        "    def test_add(self):\n        self.assertEqual(2 + 3, 5)\n\n"
        "    def test_sub(self):\n        self.assertEqual(5 - 3, 2)\n\n"
        "    def test_mul(self):\n        self.assertEqual(2 * 3, 6)\n"
    ),
}
UT_FAIL = {
    "test_mixed.py": (
        "import unittest\n\n\n"
        "class Mixed(unittest.TestCase):\n"
        "    def test_ok(self):\n        pass\n\n"
        "    def test_bad(self):\n        self.assertEqual(1, 2)\n\n"
        "    def test_error(self):\n        raise RuntimeError('boom')\n\n"
        "    @unittest.skip('later')\n    def test_skipped(self):\n        pass\n\n"
        "    @unittest.expectedFailure\n    def test_known_bug(self):\n        self.assertEqual(1, 2)\n\n"
        "    def test_sub(self):\n"
        "        for i in range(2):\n"
        "            with self.subTest(i=i):\n                self.assertEqual(i, 0)\n"
    ),
}
UT_SKIPPED = {
    "test_later.py": (
        "import unittest\n\n\n"
        "class Later(unittest.TestCase):\n"
        "    @unittest.skip('not yet')\n    def test_one(self):\n        pass\n\n"
        "    @unittest.skip('not yet')\n    def test_two(self):\n        pass\n"
    ),
}

NODE_PASS = {
    "test/math.test.js": (
        "const test = require('node:test');\nconst assert = require('node:assert');\n\n"
        "test('adds numbers', () => assert.strictEqual(1 + 1, 2));\n"
        "test('multiplies', () => assert.strictEqual(2 * 3, 6));\n"
        "test.describe('strings', () => {\n"
        "  test.it('joins', () => assert.strictEqual('a' + 'b', 'ab'));\n"
        "});\n"
    ),
    "test/other.test.js": (
        "const test = require('node:test');\n\ntest('other file works', () => {});\n"
    ),
}
NODE_FAIL = {
    "test/mixed.test.js": (
        "const test = require('node:test');\nconst assert = require('node:assert');\n\n"
        "test('adds numbers', () => assert.strictEqual(1 + 1, 2));\n"
        "test('fails here', () => assert.strictEqual(1, 2));\n"
        "test('skipped one', { skip: 'later' }, () => {});\n"
        "test('todo one', { todo: true }, () => {});\n"
        "test.describe('suite A', () => {\n"
        "  test.it('inner ok', () => {});\n"
        "  test.it('inner bad', () => { throw new Error('boom'); });\n"
        "});\n"
    ),
}
NODE_SKIPPED = {
    "test/later.test.js": (
        "const test = require('node:test');\n\n"
        "test('first later', { skip: 'not yet' }, () => {});\n"
        "test('second later', { skip: true }, () => {});\n"
    ),
}
NODE_EMPTY = {"README.md": "no tests here\n"}

JEST_PKG = {"package.json": '{\n  "name": "proj",\n  "version": "1.0.0",\n  "private": true\n}\n'}
JEST_PASS = {
    **JEST_PKG,
    "sum.test.js": (
        "describe('math', () => {\n"
        "  test('adds 1 + 2', () => { expect(1 + 2).toBe(3); });\n"
        "  describe('nested', () => { it('deep ok', () => { expect(true).toBe(true); }); });\n"
        "});\n"
        "test('top level ok', () => {});\n"
    ),
}
JEST_FAIL = {
    **JEST_PKG,
    "mixed.test.js": (
        "describe('math', () => {\n"
        "  test('adds 1 + 2', () => { expect(1 + 2).toBe(3); });\n"
        "  test('fails on purpose', () => { expect(1).toBe(2); });\n"
        "  test.skip('skipped test', () => {});\n"
        "  test.todo('write me');\n"
        "});\n"
        "test('top level ok', () => {});\n"
    ),
    "other.test.js": "test('other passes', () => {});\ntest('other fails', () => { throw new Error('nope'); });\n",
    "broken.test.js": "require('./missing-module');\ntest('never runs', () => {});\n",
}
JEST_SKIPPED = {
    **JEST_PKG,
    "later.test.js": "test.skip('first later', () => {});\ntest.skip('second later', () => {});\n",
}
JEST_EMPTY = {**JEST_PKG, "index.js": "module.exports = 1;\n"}

VITEST_PASS = {
    "package.json": '{\n  "name": "proj",\n  "version": "1.0.0",\n  "private": true,\n  "type": "module"\n}\n',
    "sum.test.js": (
        "describe('math', () => {\n"
        "  test('adds 1 + 2', () => { expect(1 + 2).toBe(3); });\n"
        "  describe('nested', () => { it('deep ok', () => { expect(true).toBe(true); }); });\n"
        "});\n"
        "test('top level ok', () => {});\n"
    ),
}
VITEST_FAIL = {
    "package.json": VITEST_PASS["package.json"],
    "mixed.test.js": JEST_FAIL["mixed.test.js"],
    "other.test.js": JEST_FAIL["other.test.js"],
    "broken.test.js": JEST_FAIL["broken.test.js"],
}
VITEST_SKIPPED = {"package.json": VITEST_PASS["package.json"], "later.test.js": JEST_SKIPPED["later.test.js"]}
VITEST_EMPTY = {"package.json": VITEST_PASS["package.json"], "index.js": "export default 1;\n"}

MOCHA_PASS = {
    "test/array.spec.js": (
        "const assert = require('assert');\n"
        "describe('Array', function () {\n"
        "  it('has length', function () { assert.strictEqual([1, 2].length, 2); });\n"
        "  describe('#indexOf()', function () {\n"
        "    it('returns -1 when absent', function () { assert.strictEqual([1].indexOf(4), -1); });\n"
        "  });\n"
        "});\n"
        "it('top level works', function () {});\n"
    ),
}
MOCHA_FAIL = {
    "test/mixed.spec.js": (
        "const assert = require('assert');\n"
        "describe('Array', function () {\n"
        "  it('works', function () {});\n"
        "  it('fails', function () { assert.strictEqual(1, 2); });\n"
        "  it.skip('skipped', function () {});\n"
        "  it('pending without body');\n"
        "  describe('nested', function () { it('deep ok', function () {}); });\n"
        "  describe('hooks', function () {\n"
        "    before(function () { throw new Error('hook boom'); });\n"
        "    it('never runs', function () {});\n"
        "  });\n"
        "});\n"
    ),
}
MOCHA_SKIPPED = {
    "test/later.spec.js": (
        "describe('Later', function () {\n"
        "  it.skip('first later', function () {});\n"
        "  it('second later');\n"
        "});\n"
    ),
}
MOCHA_EMPTY = {"test/empty.spec.js": "// no tests yet\n"}

GO_MOD = (("go", "mod", "init", "x"),)
GO_PASS = {
    "calc/calc.go": "package calc\n\nfunc Add(a, b int) int { return a + b }\n",
    "calc/calc_test.go": (
        'package calc\n\nimport "testing"\n\n'
        "func TestAdd(t *testing.T) {\n\tif Add(2, 3) != 5 {\n\t\tt.Fatal(\"bad\")\n\t}\n}\n\n"
        "func TestAddTable(t *testing.T) {\n"
        '\tfor _, name := range []string{"small", "large"} {\n'
        "\t\tt.Run(name, func(t *testing.T) {})\n\t}\n}\n"
    ),
    "strs/strs_test.go": 'package strs\n\nimport "testing"\n\nfunc TestJoin(t *testing.T) {}\n',
    "cmd/main.go": "package main\n\nfunc main() {}\n",
}
GO_FAIL = {
    "a/a_test.go": (
        'package a\n\nimport "testing"\n\n'
        "func TestOk(t *testing.T) {}\n"
        'func TestBad(t *testing.T) { t.Fatal("boom") }\n'
        'func TestSkip(t *testing.T) { t.Skip("later") }\n'
        "func TestSub(t *testing.T) {\n"
        '\tt.Run("one", func(t *testing.T) {})\n'
        '\tt.Run("two", func(t *testing.T) { t.Error("nope") })\n}\n'
    ),
    "b/b_test.go": 'package b\n\nimport "testing"\n\nfunc TestB1(t *testing.T) {}\nfunc TestB2(t *testing.T) {}\n',
    "c/c.go": "package c\n\nfunc C() int { return 1 }\n",
}
GO_SKIPPED = {
    "a/a_test.go": (
        'package a\n\nimport "testing"\n\n'
        'func TestLater(t *testing.T) { t.Skip("not yet") }\n'
        'func TestLater2(t *testing.T) { t.Skip("not yet") }\n'
    ),
}
GO_EMPTY = {
    "a/a.go": "package a\n\nfunc A() int { return 1 }\n",
    "b/b.go": "package b\n\nfunc B() int { return 2 }\n",
}
GO_BUILD_ERROR = {
    "ok/ok_test.go": 'package ok\n\nimport "testing"\n\nfunc TestFine(t *testing.T) {}\n',
    "broken/broken_test.go": 'package broken\n\nimport "testing"\n\nfunc TestBroken(t *testing.T) { undefinedThing() }\n',
}

CARGO_TOML = '[package]\nname = "demo"\nversion = "0.1.0"\nedition = "2021"\n\n[dependencies]\n'
CARGO_PASS = {
    "Cargo.toml": CARGO_TOML,
    "src/lib.rs": (
        "pub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n\n"
        "#[cfg(test)]\nmod tests {\n    use super::*;\n\n"
        "    #[test]\n    fn it_works() {\n        assert_eq!(add(2, 2), 4);\n    }\n\n"
        "    #[test]\n    fn negative() {\n        assert_eq!(add(-2, -2), -4);\n    }\n}\n"
    ),
}
CARGO_FAIL = {
    "Cargo.toml": CARGO_TOML,
    "src/lib.rs": (
        "pub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n\n"
        "#[cfg(test)]\nmod tests {\n    use super::*;\n\n"
        "    #[test]\n    fn it_works() {\n        assert_eq!(add(2, 2), 4);\n    }\n\n"
        "    #[test]\n    fn it_fails() {\n        assert_eq!(add(2, 2), 5);\n    }\n\n"
        "    #[test]\n    #[ignore]\n    fn slow() {}\n}\n"
    ),
}
CARGO_SKIPPED = {
    "Cargo.toml": CARGO_TOML,
    "src/lib.rs": (
        "#[cfg(test)]\nmod tests {\n"
        "    #[test]\n    #[ignore]\n    fn later_one() {}\n\n"
        "    #[test]\n    #[ignore]\n    fn later_two() {}\n}\n"
    ),
}
CARGO_EMPTY = {"Cargo.toml": CARGO_TOML, "src/lib.rs": "pub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n"}
CARGO_MULTI = {
    "Cargo.toml": '[workspace]\nmembers = ["alpha", "beta"]\nresolver = "2"\n',
    "alpha/Cargo.toml": CARGO_TOML.replace("demo", "alpha"),
    "alpha/src/lib.rs": (
        "pub fn one() -> i32 {\n    1\n}\n\n"
        "#[cfg(test)]\nmod tests {\n    #[test]\n    fn one_is_one() {\n        assert_eq!(super::one(), 1);\n    }\n}\n"
    ),
    "alpha/tests/integration.rs": "#[test]\nfn from_outside() {\n    assert_eq!(alpha::one(), 1);\n}\n",
    "beta/Cargo.toml": CARGO_TOML.replace("demo", "beta"),
    "beta/src/lib.rs": (
        "#[cfg(test)]\nmod tests {\n    #[test]\n    fn beta_a() {}\n\n    #[test]\n    #[ignore]\n    fn beta_slow() {}\n}\n"
    ),
}
CARGO_BUILD_ERROR = {
    "Cargo.toml": CARGO_TOML,
    "src/lib.rs": "#[cfg(test)]\nmod tests {\n    #[test]\n    fn broken() {\n        let x: i32 = \"text\";\n    }\n}\n",
}

PYTEST = ("python", "-m", "pytest", "-p", "no:cacheprovider")
UNITTEST = ("python", "-m", "unittest")
NODE_SPEC = ("node", "--test", "--test-reporter=spec")
NODE_TAP = ("node", "--test", "--test-reporter=tap")
CARGO = ("cargo", "test", "--offline")

CASES: list[Case] = [
    Case("pytest", "pass", PY_PASS, (*PYTEST, "-v")),
    Case("pytest", "fail", PY_FAIL, (*PYTEST, "-rA")),
    Case("pytest", "fail-q", PY_FAIL, (*PYTEST, "-q")),
    Case("pytest", "skipped", PY_SKIPPED, (*PYTEST, "-q")),
    Case("pytest", "zero", PY_EMPTY, (*PYTEST, "-q")),
    Case("pytest", "deselected", PY_PASS, (*PYTEST, "-q", "-k", "nothing_matches")),
    Case("pytest", "collect-error", PY_COLLECT_ERROR, (*PYTEST, "-q")),
    Case("unittest", "pass", UT_PASS, (*UNITTEST, "-v")),
    Case("unittest", "fail", UT_FAIL, UNITTEST),
    Case("unittest", "fail-v", UT_FAIL, (*UNITTEST, "-v")),
    Case("unittest", "skipped", UT_SKIPPED, (*UNITTEST, "-v")),
    Case("unittest", "zero", PY_EMPTY, UNITTEST),
    Case("node-spec", "pass", NODE_PASS, NODE_SPEC),
    Case("node-spec", "fail", NODE_FAIL, NODE_SPEC),
    Case("node-spec", "skipped", NODE_SKIPPED, NODE_SPEC),
    Case("node-spec", "zero", NODE_EMPTY, NODE_SPEC),
    Case("node-tap", "pass", NODE_PASS, NODE_TAP),
    Case("node-tap", "fail", NODE_FAIL, NODE_TAP),
    Case("node-tap", "skipped", NODE_SKIPPED, NODE_TAP),
    Case("node-tap", "zero", NODE_EMPTY, NODE_TAP),
    Case("node-default", "fail", NODE_FAIL, ("node", "--test")),
    Case("jest", "pass", JEST_PASS, ("jest", "--ci")),
    Case("jest", "fail", JEST_FAIL, ("jest", "--ci")),
    Case("jest", "fail-verbose", JEST_FAIL, ("jest", "--ci", "--verbose")),
    Case("jest", "skipped", JEST_SKIPPED, ("jest", "--ci")),
    Case("jest", "zero", JEST_EMPTY, ("jest", "--ci")),
    Case("jest", "zero-pass", JEST_EMPTY, ("jest", "--ci", "--passWithNoTests")),
    Case("vitest", "pass", VITEST_PASS, ("vitest", "run", "--globals")),
    Case("vitest", "pass-verbose", VITEST_PASS, ("vitest", "run", "--globals", "--reporter=verbose")),
    Case("vitest", "fail", VITEST_FAIL, ("vitest", "run", "--globals")),
    Case("vitest", "skipped", VITEST_SKIPPED, ("vitest", "run", "--globals")),
    Case("vitest", "zero", VITEST_EMPTY, ("vitest", "run", "--globals")),
    Case("vitest", "zero-pass", VITEST_EMPTY, ("vitest", "run", "--globals", "--passWithNoTests")),
    Case("mocha", "pass", MOCHA_PASS, ("mocha",)),
    Case("mocha", "fail", MOCHA_FAIL, ("mocha",)),
    Case("mocha", "skipped", MOCHA_SKIPPED, ("mocha",)),
    Case("mocha", "zero", MOCHA_EMPTY, ("mocha",)),
    Case("mocha", "no-files", JEST_EMPTY, ("mocha",)),
    Case("tap", "mocha-fail", MOCHA_FAIL, ("mocha", "--reporter", "tap")),
    Case("go", "pass", GO_PASS, ("go", "test", "./..."), GO_MOD),
    Case("go", "pass-v", GO_PASS, ("go", "test", "-v", "./..."), GO_MOD),
    Case("go", "fail", GO_FAIL, ("go", "test", "./..."), GO_MOD),
    Case("go", "fail-v", GO_FAIL, ("go", "test", "-v", "./..."), GO_MOD),
    Case("go", "skipped-v", GO_SKIPPED, ("go", "test", "-v", "./..."), GO_MOD),
    Case("go", "zero", GO_EMPTY, ("go", "test", "./..."), GO_MOD),
    Case("go", "zero-run", GO_FAIL, ("go", "test", "-run", "NothingMatches", "./..."), GO_MOD),
    Case("go", "zero-run-v", GO_FAIL, ("go", "test", "-v", "-run", "NothingMatches", "./b"), GO_MOD),
    Case("go", "build-error", GO_BUILD_ERROR, ("go", "test", "./..."), GO_MOD),
    Case("cargo", "pass", CARGO_PASS, CARGO),
    Case("cargo", "fail", CARGO_FAIL, CARGO),
    Case("cargo", "skipped", CARGO_SKIPPED, CARGO),
    Case("cargo", "zero", CARGO_EMPTY, CARGO),
    Case("cargo", "filtered", CARGO_PASS, (*CARGO, "nothing_matches")),
    Case("cargo", "multi", CARGO_MULTI, CARGO),
    Case("cargo", "build-error", CARGO_BUILD_ERROR, CARGO),
]


# --- tools --------------------------------------------------------------------------------------


def tool_path(key: str) -> str | None:
    """Executable for a tool key (``python``, ``node``, ``jest``, ``vitest``, ``mocha``, ``go``,
    ``cargo``), or None when it is not installed."""
    if key == "python":
        return sys.executable
    if key in ("jest", "vitest", "mocha"):
        p = NODE_BIN / key
        return str(p) if p.exists() and shutil.which("node") else None
    fallbacks = {"go": ["/usr/bin/go", "/usr/local/go/bin/go"], "cargo": [str(Path.home() / ".cargo/bin/cargo"), "/root/.cargo/bin/cargo"]}
    found = shutil.which(key)
    if found:
        return found
    for p in fallbacks.get(key, []):
        if os.access(p, os.X_OK):
            return p
    return None


def case_tool(case: Case) -> str | None:
    """Executable of the case's tool, or None when missing."""
    return tool_path(case.argv[0])


def _version(argv: list[str]) -> str:
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return (p.stdout.strip() or p.stderr.strip()).splitlines()[0] if (p.stdout.strip() or p.stderr.strip()) else "unknown"


def tool_version(case: Case) -> str:
    """Human-readable version of the case's tool (for the header line)."""
    key = case.argv[0]
    exe = tool_path(key)
    assert exe is not None
    if key == "python" and case.runner == "pytest":
        return f"{_version([exe, '-m', 'pytest', '--version'])} (Python {sys.version.split()[0]})"
    if key == "python":
        return f"unittest (Python {sys.version.split()[0]})"
    if key == "node":
        return f"node {_version([exe, '--version'])}"
    if key in ("jest", "vitest", "mocha"):
        version = _version([exe, "--version"])
        name = version if version.startswith(key) else f"{key} {version}"
        return f"{name} (node {_version(['node', '--version'])})"
    if key == "go":
        return _version([exe, "version"])
    if key == "cargo":
        return f"{_version([exe, '--version'])}; {_version([str(Path(exe).with_name('rustc')), '--version'])}"
    return key


def _env(work: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "NO_COLOR", "PYTEST_ADDOPTS", "NODE_OPTIONS")}
    env.update(
        {
            "RUST_BACKTRACE": "0",
            "CARGO_TARGET_DIR": str(work / "target"),
            "CARGO_TERM_COLOR": "never",
            "GOFLAGS": "-mod=mod",
            "GOPROXY": "off",
            "GOTOOLCHAIN": "local",
            "GO111MODULE": "on",
        }
    )
    return env


def run_case(case: Case, timeout_s: float = 240) -> tuple[int, str]:
    """Build the case's project in a fresh temp dir, run it and return ``(exit code, output)``.

    The output is stdout and stderr merged into one file (as the check runner captures them), decoded
    as UTF-8 with replacement, the temp path replaced by ``/tmp/proj``.

    Raises:
        FileNotFoundError: the case's tool is not installed.
    """
    exe = case_tool(case)
    if exe is None:
        raise FileNotFoundError(f"{case.argv[0]} is not installed")
    return run_project([exe, *case.argv[1:]], case.files, case.setup, _env, tool_path, timeout_s)


def run_project(argv: Sequence[str], files: Mapping[str, str], setup: Sequence[Sequence[str]],
                env_for: Callable[[Path], dict[str, str]], find: Callable[[str], str | None],
                timeout_s: float) -> tuple[int, str]:
    """Write ``files`` into ``<tmp>/proj``, run each ``setup`` command there (``find`` resolves its
    tool; output not kept), then ``argv`` with stdin at EOF and stdout + stderr merged into one file.
    Returns ``(exit code, output)``: UTF-8 with replacement, the project path replaced by ``/tmp/proj``
    and the temp dir by ``/tmp``. ``env_for(tmp)`` gives the environment (caches may live in ``tmp``).
    Shared by ``record_toolchains.py``.

    Raises:
        subprocess.CalledProcessError: a setup command failed.
        subprocess.TimeoutExpired: a command ran longer than ``timeout_s`` (seconds).
    """
    with tempfile.TemporaryDirectory(prefix="ts-rec-") as tmp:
        work = Path(tmp)
        proj = work / "proj"
        proj.mkdir()
        for rel, text in files.items():
            p = proj / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text, encoding="utf-8")
        env = env_for(work)
        for cmd in setup:
            subprocess.run([find(cmd[0]) or cmd[0], *cmd[1:]], cwd=proj, env=env, check=True,
                           stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout_s)
        out_path = work / "output.txt"
        with open(out_path, "wb") as out:
            done = subprocess.run(list(argv), cwd=proj, env=env, stdin=subprocess.DEVNULL,
                                  stdout=out, stderr=subprocess.STDOUT, timeout=timeout_s)
        text = out_path.read_bytes().decode("utf-8", errors="replace")
        for path, replacement in ((proj, PROJ), (work, "/tmp")):
            for variant in sorted({str(path), os.path.realpath(path)}, key=len, reverse=True):
                text = text.replace(variant, replacement)
        return done.returncode, text


def header(case: Case, exit_code: int) -> str:
    """The header line (without newline) recorded before the output."""
    return f"{HEADER_PREFIX}; tool: {tool_version(case)}; argv: {' '.join(case.argv)}; exit: {exit_code}"


def read_recording(path: Path) -> tuple[dict[str, str], str]:
    """Split a recorded file into ``({"tool", "argv", "exit"}, full text)``; the text keeps the
    header line (the parsers must ignore it)."""
    text = path.read_text(encoding="utf-8")
    first = text.split("\n", 1)[0]
    m = _HEADER_RE.match(first)
    if not m:
        raise ValueError(f"{path.name}: no record.py header")
    return m.groupdict(), text


def recorded(name: str) -> Path:
    """Path of the recording called ``name`` (``pytest-fail.txt``, or its stem ``pytest-fail``) in
    its toolchain folder.

    Raises:
        KeyError: no case records a file of that name.
    """
    filename = name if name.endswith(".txt") else f"{name}.txt"
    return {c.filename: c.path for c in CASES}[filename]


def recordings() -> list[Path]:
    """Every file in the toolchain folders that this script recorded (its first line is the
    ``#% recorded by record.py;`` header), whether or not a case still produces it; sorted."""
    found = []
    for path in sorted(HERE.glob("*/*.txt")):
        with path.open(encoding="utf-8", errors="replace") as f:
            if f.readline().startswith(HEADER_PREFIX + ";"):
                found.append(path)
    return found


def record(case: Case) -> Path | None:
    """Run ``case`` and write ``<toolchain>/<runner>-<case>.txt``; None when the tool is missing."""
    if case_tool(case) is None:
        print(f"skip {case.filename}: {case.argv[0]} not installed", file=sys.stderr)
        return None
    code, text = run_case(case)
    path = case.path
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(header(case, code) + "\n" + text, encoding="utf-8")
    print(f"wrote {case.toolchain}/{case.filename} (exit {code}, {len(text)} chars)", file=sys.stderr)
    return path


def main(argv: list[str]) -> int:
    wanted = set(argv)
    for case in CASES:
        if wanted and not wanted & {case.runner, case.toolchain, case.filename}:
            continue
        record(case)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
