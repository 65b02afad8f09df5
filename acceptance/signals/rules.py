"""The per-language rules of the change signals (docs/acceptance.md §4.4, docs/acceptance.md §8.6): what a
test file is, and the patterns and line tests of ``debugLeftover``, ``skippedOrOnlyTests``, ``deletedTests``,
``weakenedTests`` and ``acceptanceTampering``. The steps of :func:`.scan.scan_changes` apply them.
Plain Python, no I/O.
"""

from __future__ import annotations

import posixpath
import re
from typing import Sequence

_STARTUP_HOOK_RE = re.compile(r"(^|/)(sitecustomize\.py|usercustomize\.py|[^/]+\.pth)$")
"""Files Python runs on its own at start-up (in every check)."""
_OUTCOME_HOOK_RE = re.compile(
    r"pytest_runtest_makereport|pytest_runtest_logreport|pytest_report_teststatus|pytest_runtest_call|"
    r"pytest_collection_modifyitems|pytest_sessionfinish|pytest_terminal_summary|\.outcome\s*=|exitstatus\s*=")
"""pytest hooks (and assignments) that can turn a failing run into a passing one."""
_DETAIL_MAX = 200


# --------------------------------------------------------------------------------------------
# Languages and test files
# --------------------------------------------------------------------------------------------

_LANG_BY_EXT = {
    "py": "py",
    "js": "js", "jsx": "js", "ts": "js", "tsx": "js", "mjs": "js", "cjs": "js", "mts": "js", "cts": "js",
    "vue": "js", "svelte": "js",
    "go": "go",
    "rs": "rs",
    "java": "java", "kt": "java", "kts": "java",
    "rb": "rb",
}
_CODE_EXT = frozenset({*_LANG_BY_EXT, "cs", "php", "swift", "c", "cc", "cpp", "h", "hpp", "scala", "ex", "exs"})
_TEST_DIR_RE = re.compile(r"(^|/)(tests?|__tests__|spec|specs|testing|e2e)/")
_TEST_NAME_RE = re.compile(
    r"^(test_.+\.py|.+_tests?\.py|conftest\.py"
    r"|.+\.(test|spec)\.[cm]?[jt]sx?"
    r"|.+_test\.go"
    r"|.+(Test|Tests|IT)\.(java|kt)"
    r"|.+_(spec|test)\.rb|test_.+\.rb)$"
)


def _ext(path: str) -> str:
    base = posixpath.basename(path)
    return base.rsplit(".", 1)[1].lower() if "." in base.lstrip(".") else ""


def _lang(path: str) -> str | None:
    return _LANG_BY_EXT.get(_ext(path))


def is_test_path(path: str) -> bool:
    """True for a source file that holds tests: a code file under a ``test/``, ``tests/``,
    ``__tests__/``, ``spec(s)/``, ``testing/`` or ``e2e/`` directory, or named like a test
    (``test_*.py``, ``*_test.py``, ``conftest.py``, ``*.test.ts``, ``*.spec.js``, ``*_test.go``,
    ``*Test.java``, ``*_spec.rb``…). Data files under ``tests/`` are not test files."""
    if _ext(path) not in _CODE_EXT:
        return False
    return bool(_TEST_DIR_RE.search(path) or _TEST_NAME_RE.match(posixpath.basename(path)))


def _is_comment(stripped: str, lang: str | None) -> bool:
    if lang in ("py", "rb"):
        return stripped.startswith("#")
    return stripped.startswith(("//", "/*", "*"))


def _snippet(line: str) -> str:
    s = line.strip()
    return s if len(s) <= _DETAIL_MAX else s[: _DETAIL_MAX - 1] + "…"


# --------------------------------------------------------------------------------------------
# debugLeftover
# --------------------------------------------------------------------------------------------

_DEBUG_RES: dict[str, list[re.Pattern[str]]] = {
    "py": [
        re.compile(r"\bbreakpoint\s*\(\s*\)"),
        re.compile(r"\b(i?pdb|pudb)\.set_trace\s*\("),
        re.compile(r"^\s*import\s+(i?pdb|pudb)\b"),
        re.compile(r"^\s*from\s+(i?pdb|pudb)\s+import\b"),
    ],
    "js": [re.compile(r"^\s*debugger\s*;?\s*(//.*)?$")],
    "rs": [re.compile(r"\bdbg!\s*\(")],
    "rb": [re.compile(r"\bbinding\.(pry|irb)\b"), re.compile(r"^\s*byebug\b")],
}
_PRINT_RE = re.compile(r"^\s*print\s*\(")
_SCRIPT_PATH_RE = re.compile(r"(^|/)(scripts?|bin|tools|examples?|docs?|benchmarks?|bench)/|(^|/)(__main__|setup|manage|noxfile)\.py$")


def _debug_leftover(path: str, line: str, lang: str | None) -> bool:
    if lang is None:
        return False
    if any(r.search(line) for r in _DEBUG_RES.get(lang, ())):
        return True
    # a stray top-level print( in Python source (tests and scripts print legitimately)
    return lang == "py" and bool(_PRINT_RE.match(line)) and not is_test_path(path) and not _SCRIPT_PATH_RE.search(path)


# --------------------------------------------------------------------------------------------
# skippedOrOnlyTests
# --------------------------------------------------------------------------------------------

_SKIP_RES: dict[str, list[re.Pattern[str]]] = {
    "js": [
        re.compile(r"\b(describe|it|test|context|suite|specify)\.(only|skip)\s*\("),
        re.compile(r"(?<![\w.$])(fit|fdescribe|fcontext|xit|xdescribe|xcontext|xtest)\s*\("),
    ],
    "py": [
        re.compile(r"\bpytest\.mark\.(skip|skipif|xfail)\b"),
        re.compile(r"\bpytest\.(skip|xfail)\s*\("),
        re.compile(r"\bunittest\.(skip|skipIf|skipUnless|expectedFailure|SkipTest)\b"),
        re.compile(r"^\s*@(skip|skipIf|skipUnless|expectedFailure)\b"),
        re.compile(r"\bself\.skipTest\s*\("),
    ],
    "go": [re.compile(r"\b(t|b|tb|f)\.(Skip|Skipf|SkipNow)\s*\(")],
    "rs": [re.compile(r"#\[\s*ignore\b")],
    "java": [re.compile(r"@(Disabled|Ignore)\b")],
}


# --------------------------------------------------------------------------------------------
# deletedTests
# --------------------------------------------------------------------------------------------

_PY_DEF_RE = re.compile(r"^(\s*)(?:async\s+)?def\s+(test\w*)\s*\(")
_JS_DEF_RE = re.compile(
    r"^(\s*)(?:.*[^\w.$])?(?:it|test|specify)(?:\.(?:only|skip|concurrent|failing))?\s*\(\s*(['\"`])(.*?)\2"
)
_GO_DEF_RE = re.compile(r"^(\s*)func\s+(Test\w*)\s*\(")
_COUNTED_DEF_RES = {  # name-less test markers: compared by count per file
    "rs": re.compile(r"#\[\s*(?:tokio::|async_std::)?test\b"),
    "java": re.compile(r"@Test\b"),
}


def _test_def(path: str, line: str, lang: str | None) -> tuple[str, int] | None:
    """``(name, indent)`` when ``line`` defines a named test in a file where such tests run."""
    if lang == "py" and is_test_path(path):
        m = _PY_DEF_RE.match(line)
        return (m.group(2), len(m.group(1).expandtabs())) if m else None
    if lang == "js" and is_test_path(path):
        m = _JS_DEF_RE.match(line)
        return (m.group(3), len(m.group(1).expandtabs())) if m else None
    if lang == "go" and path.endswith("_test.go"):
        m = _GO_DEF_RE.match(line)
        return (m.group(2), len(m.group(1).expandtabs())) if m else None
    return None


# --------------------------------------------------------------------------------------------
# weakenedTests
# --------------------------------------------------------------------------------------------

_ASSERT_RE = re.compile(
    r"^\s*assert\b"  # Python statement, Node assert(...)
    r"|\bassert[A-Z_]\w*\s*\("  # assertEqual(, assert_called_once_with(, assertThat(
    r"|\b(assert|require)\.\w+\s*\("  # node:assert, chai, testify
    r"|\bexpect\s*\("  # jest/vitest/chai
    r"|\bassert(_eq|_ne)?!\s*\("  # Rust
    r"|\bt\.(Error|Errorf|Fatal|Fatalf|Fail|FailNow)\s*\("  # Go
    r"|\.should\b|\bpytest\.raises\s*\(|\bself\.fail\s*\("
)
_TRIVIAL_RES = [
    re.compile(r"^\s*assert\s*\(?\s*(True|1|not\s+False|not\s+None)\s*\)?\s*(,.*)?$"),
    re.compile(r"^\s*assert\s+(\w+|\d+|'[^']*'|\"[^\"]*\")\s*==\s*\1\s*(,.*)?$"),
    re.compile(r"\bassertTrue\s*\(\s*(True|1)\s*[,)]"),
    re.compile(r"\bassertFalse\s*\(\s*(False|0|None)\s*[,)]"),
    re.compile(r"\bassert(Equal|Equals|StrictEqual|DeepEqual)\s*\(\s*([\w.'\"]+)\s*,\s*\2\s*[,)]"),
    re.compile(r"\bexpect\s*\(\s*(true|1|null|undefined|(['\"])[^'\"]*\2)\s*\)\s*\.\s*(toBe|toEqual|toStrictEqual)\s*\(\s*\1\s*\)"),
    re.compile(r"\bexpect\s*\(\s*true\s*\)\s*\.\s*(toBeTruthy|toBeDefined)\s*\(\s*\)"),
    re.compile(r"\bexpect\s*\(\s*false\s*\)\s*\.\s*toBeFalsy\s*\(\s*\)"),
    re.compile(r"\bassert(\.ok)?\s*\(\s*true\s*\)"),
    re.compile(r"\bassert!\s*\(\s*true\s*\)"),
    re.compile(r"\bassert_eq!\s*\(\s*([\w.\"]+)\s*,\s*\1\s*\)"),
]


def _norm(line: str) -> str:
    return re.sub(r"\s+", "", line)


# --------------------------------------------------------------------------------------------
# acceptanceTampering
# --------------------------------------------------------------------------------------------

_ACCEPTANCE_FILE_RE = re.compile(r"(^|/)\.tianshu-mcp/acceptance\.json$")
_ALWAYS_CONFIG_RE = re.compile(
    r"(^|/)(pytest\.ini|\.coveragerc"
    r"|(jest|vitest|vite|karma|playwright|cypress|mocha)\.config\.[cm]?[jt]s|\.mocharc(\.\w+)?|jest\.config\.json"
    r"|\.gitlab-ci\.yml|Jenkinsfile|azure-pipelines\.yml|\.travis\.yml)$"
    r"|(^|/)\.github/workflows/[^/]+\.ya?ml$|(^|/)\.circleci/config\.yml$"
)
_PY_CFG_RE = re.compile(r"(^|/)(pyproject\.toml|setup\.cfg|tox\.ini)$")
_PY_CFG_LINE_RE = re.compile(
    r"^\s*(\[tool\.pytest[^\]]*\]|\[tool:pytest\]|\[pytest\]|\[tool\.coverage[^\]]*\]"
    r"|(addopts|testpaths|python_files|python_classes|python_functions|norecursedirs|collect_ignore|fail_under)\s*=)"
)
_CONFTEST_LINE_RE = re.compile(r"\bcollect_ignore(_glob)?\b|\bpytest_collection_modifyitems\b|\bpytest_ignore_collect\b")
_PKG_JSON_RE = re.compile(r"(^|/)package\.json$")
_PKG_LINE_RE = re.compile(r"^\s*\"(test|lint|typecheck|build|check|verify|ci|pretest|posttest)(:[^\"]*)?\"\s*:|^\s*\"(jest|vitest|mocha)\"\s*:")
_MAKEFILE_RE = re.compile(r"(^|/)(GNUmakefile|makefile|Makefile)$")
_TOKEN_RE = re.compile(r"[^\s'\"=;&|()<>`,]+")


def _argv_paths(check_argvs: Sequence[Sequence[str]], prefix: str) -> tuple[set[str], bool]:
    """Repository-relative candidate paths named in the check argvs, and whether a check runs make."""
    paths: set[str] = set()
    uses_make = False
    for argv in check_argvs:
        if argv and posixpath.basename(str(argv[0])) in ("make", "gmake"):
            uses_make = True
        for arg in argv:
            for tok in _TOKEN_RE.findall(str(arg).replace("\\", "/")):
                if tok.startswith(("-", "/")):
                    continue
                p = posixpath.normpath(posixpath.join(prefix, tok)) if prefix else posixpath.normpath(tok)
                if p and not p.startswith(".."):
                    paths.add(p)
    return paths, uses_make


def _config_edit(path: str, lines: Sequence[str]) -> str | None:
    """Why an edit of ``path`` (with these added+removed lines) touches test/CI configuration."""
    if _ALWAYS_CONFIG_RE.search(path):
        return "test runner / CI configuration changed"
    if _PY_CFG_RE.search(path):
        hits = [ln for ln in lines if _PY_CFG_LINE_RE.match(ln)]
        return f"pytest/coverage settings changed: `{_snippet(hits[0])}`" if hits else None
    if posixpath.basename(path) == "conftest.py":
        hits = [ln for ln in lines if _CONFTEST_LINE_RE.search(ln)]
        return f"test collection altered in conftest.py: `{_snippet(hits[0])}`" if hits else None
    if _PKG_JSON_RE.search(path):
        hits = [ln for ln in lines if _PKG_LINE_RE.match(ln)]
        return f"package.json test/check script or runner config changed: `{_snippet(hits[0])}`" if hits else None
    return None
