"""acceptance.toolchains.formats.junit: parse_junit / collect_junit (docs/toolchains.md §3).

Real reports only: pytest ``--junitxml`` and CTest ``--output-junit`` are run live on tiny
projects in tmp dirs; Surefire (a real offline Maven run), Gradle, jest-junit, go-junit-report,
cargo-nextest, PHPUnit and ExUnit reports are the files under ``tests/data/toolchains/junit/``
(their sources in the README there). The hostile documents (billion laughs, external entities)
must be refused before anything is expanded or read.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tianshu_mcp.acceptance.toolchains.base import MAX_IDS, TestCounts
from tianshu_mcp.acceptance.toolchains.formats import junit, junit_files
from tianshu_mcp.acceptance.toolchains.formats.junit import JUnitError, parse_junit
from tianshu_mcp.acceptance.toolchains.formats.junit_files import collect_junit

DATA = Path(__file__).resolve().parent / "data" / "toolchains" / "junit"


def _counts(c: TestCounts) -> tuple[int, int, int, int]:
    return c.passed, c.failed, c.errors, c.skipped


# --- recorded real reports -----------------------------------------------------------------------

RECORDED = {
    # file: ((passed, failed, errors, skipped), failed_ids, some passed ids)
    "surefire-TEST-demo.CalcTest.xml": (
        (2, 1, 1, 1),
        ["demo.CalcTest.throwsOnPurpose", "demo.CalcTest.failsOnPurpose"],
        ["demo.CalcTest.adds", "demo.CalcTest.flaky"],  # flaky: passed on its rerun
    ),
    "ctest.xml": ((1, 1, 0, 2), ["fails_on_purpose"], ["adds"]),
    "gradle-spring-failure.xml": (
        (2, 1, 0, 0),
        ["com.victor.paymentreporting.app.PowerDroidControllerTest.failsToDemonstrateJUnitAnnotations()"],
        ["com.victor.paymentreporting.app.PowerDroidControllerTest.helloReturnsPowerDroidMessage()"],
    ),
    "gradle-TEST-com.github.guenhter.junit.CalculatorTest.xml": (
        (24, 0, 0, 0), [], ["com.github.guenhter.junit.CalculatorTest.[1] 1, 2, 3"],
    ),
    "jest-junit.xml": (
        (1, 4, 0, 1),
        ["Test 1 › Test 1.1.Failing test", "Test 1 › Test 1.1.Exception in target unit",
         "Test 2.Exception in test", "Timeout test"],
        ["Test 1.Passing test"],
    ),
    "jest-junit-default.xml": (
        (1, 4, 0, 1),
        ["Test 1 Test 1.1 Failing test", "Test 1 Test 1.1 Exception in target unit",
         "Test 2 Exception in test", "Timeout test"],
        ["Test 1 Passing test"],
    ),
    "go-junit-report.xml": (
        (2, 2, 0, 1),
        ["github.com/company/package3.TestPackage3-1", "github.com/company/package3.TestPackage3-4"],
        ["github.com/company/package2.TestPackage2", "github.com/company/package3.TestPackage3-2"],
    ),
    "nextest.xml": (
        (2, 1, 0, 0), ["oxidized_navigation::parry3d.test_failure"],
        ["oxidized_navigation::parry3d.test_simple_navigation", "oxidized_navigation::parry3d.test_annotations"],
    ),
    "phpunit.xml": (
        (10, 2, 0, 0),
        # absolute `file` attributes are left out of the ids (they differ between worktrees)
        ["targeting-traits-with-coversclass-attribute-is-deprecated.phpt",
         "targeting-traits-with-usesclass-attribute-is-deprecated.phpt"],
        ["PHPUnit.Event.DirectDispatcherTest.testDispatchRejectsUnknownEventType"],
    ),
    "exunit-junit-formatter.xml": ((0, 1, 0, 0), ["Elixir.FormatterTest.FailureTest.test it will fail"], []),
}


@pytest.mark.parametrize("name", sorted(RECORDED))
def test_recorded_reports(name: str) -> None:
    expected, failed_ids, passed_some = RECORDED[name]
    c = parse_junit((DATA / name).read_bytes(), name)
    assert c.runner == "junit"
    assert _counts(c) == expected
    assert c.failed_ids == failed_ids
    assert set(passed_some) <= set(c.passed_ids)
    assert len(c.passed_ids) == c.passed  # every passed case of these reports has a distinct id


def test_every_recorded_report_is_tested_and_documented() -> None:
    files = {p.name for p in DATA.glob("*.xml")}
    assert files == set(RECORDED)
    readme = (DATA / "README.md").read_text(encoding="utf-8")
    assert all(f"`{name}`" in readme for name in files)


def test_surefire_reruns_are_not_outcomes() -> None:
    """The flaky case carries only <flakyFailure>: a pass; the failing ones carry <failure>/<error>
    plus <rerunFailure>/<rerunError>: counted once each."""
    data = (DATA / "surefire-TEST-demo.CalcTest.xml").read_bytes()
    assert b"<flakyFailure" in data and b"<rerunFailure" in data and b"<rerunError" in data
    c = parse_junit(data)
    assert "demo.CalcTest.flaky" in c.passed_ids
    assert c.total == 5


# --- live runs -----------------------------------------------------------------------------------

PYTEST_PROJECT = {
    "tests/test_demo.py": '''
import pytest

@pytest.fixture
def broken():
    raise RuntimeError("fixture broke")

def test_ok():
    assert 1 + 1 == 2

def test_fails():
    assert 1 + 1 == 3

@pytest.mark.skip(reason="not yet")
def test_skipped():
    pass

def test_errors(broken):
    pass

class TestGroup:
    def test_in_class(self):
        assert True

@pytest.mark.xfail(reason="known")
def test_xfail():
    assert False
''',
}


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")


def _run_pytest(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "COV_"))}
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"  # core pytest writes the report; plugins only slow it
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        cwd=project, env=env, capture_output=True, text=True, timeout=180, check=False,
    )


@pytest.mark.parametrize("family", ["xunit2", "xunit1"])
def test_pytest_live_pass_fail_skip_error(tmp_path: Path, family: str) -> None:
    _write(tmp_path, PYTEST_PROJECT)
    started = time.time()
    run = _run_pytest(tmp_path, "-o", f"junit_family={family}", "--junitxml=reports/junit.xml", "tests")
    assert run.returncode == 1, run.stdout + run.stderr
    res = collect_junit(tmp_path, "reports/*.xml", started)
    assert res.files == ["reports/junit.xml"] and not res.stale and not res.errors
    c = res.counts
    assert c is not None
    assert _counts(c) == (2, 1, 1, 2)  # xfail counts as skipped, as in the text form
    if family == "xunit2":  # the default: classname.name
        assert c.failed_ids == ["tests.test_demo.test_fails", "tests.test_demo.test_errors"]
        assert c.passed_ids == ["tests.test_demo.test_ok", "tests.test_demo.TestGroup.test_in_class"]
    else:  # xunit1 writes file=: the ids are pytest's node ids
        assert c.failed_ids == ["tests/test_demo.py::test_fails", "tests/test_demo.py::test_errors"]
        assert c.passed_ids == ["tests/test_demo.py::test_ok", "tests/test_demo.py::TestGroup::test_in_class"]
    assert "read 1 file (6 tests: 2 passed, 1 failed, 1 errors, 2 skipped)" in res.note


def test_pytest_live_zero_tests(tmp_path: Path) -> None:
    _write(tmp_path, {"tests/test_nothing.py": "X = 1\n"})
    started = time.time()
    run = _run_pytest(tmp_path, "--junitxml=junit.xml", "tests")
    assert run.returncode == 5, run.stdout + run.stderr  # pytest: no tests collected
    res = collect_junit(tmp_path, "junit.xml", started)
    assert res.counts is not None and res.counts.total == 0  # recognisable as "ran no test"
    assert res.counts.failed_ids == [] and res.counts.passed_ids == []


def test_pytest_live_all_skipped(tmp_path: Path) -> None:
    _write(tmp_path, {"tests/test_skip.py": "import pytest\n\n@pytest.mark.skip\ndef test_a():\n    pass\n"})
    started = time.time()
    _run_pytest(tmp_path, "--junitxml=junit.xml", "tests")
    c = collect_junit(tmp_path, "junit.xml", started).counts
    assert c is not None and _counts(c) == (0, 0, 0, 1)  # all skipped: the runner fails it closed


def test_pytest_live_collection_error(tmp_path: Path) -> None:
    _write(tmp_path, {"tests/test_broken.py": "import no_such_module_here\n\ndef test_a():\n    pass\n"})
    started = time.time()
    run = _run_pytest(tmp_path, "--junitxml=junit.xml", "tests")
    assert run.returncode == 2, run.stdout + run.stderr
    c = collect_junit(tmp_path, "junit.xml", started).counts
    assert c is not None and _counts(c) == (0, 0, 1, 0)
    assert c.failed_ids == ["tests.test_broken"]


CTEST_PROJECT = {
    "CMakeLists.txt": """cmake_minimum_required(VERSION 3.21)
project(demo C)
enable_testing()
add_executable(check check.c)
add_test(NAME adds COMMAND check add)
add_test(NAME fails_on_purpose COMMAND check fail)
add_test(NAME skipped_on_purpose COMMAND check skip)
set_tests_properties(skipped_on_purpose PROPERTIES SKIP_RETURN_CODE 77)
add_test(NAME disabled_one COMMAND check add)
set_tests_properties(disabled_one PROPERTIES DISABLED TRUE)
""",
    "check.c": """#include <stdio.h>
#include <string.h>
int main(int argc, char **argv) {
    if (argc < 2) return 2;
    if (strcmp(argv[1], "add") == 0) return (2 + 2 == 4) ? 0 : 1;
    if (strcmp(argv[1], "skip") == 0) { puts("no device here"); return 77; }
    fprintf(stderr, "expected 5, got 4\\n");
    return 1;
}
""",
}


@pytest.mark.skipif(not (shutil.which("cmake") and shutil.which("ctest") and (shutil.which("cc") or shutil.which("gcc"))),
                    reason="cmake/ctest or a C compiler is not installed")
def test_ctest_live(tmp_path: Path) -> None:
    _write(tmp_path, CTEST_PROJECT)
    build = tmp_path / "build"
    for argv in (["cmake", "-S", ".", "-B", "build", "-Wno-dev"], ["cmake", "--build", "build"]):
        done = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False)
        assert done.returncode == 0, done.stdout + done.stderr
    started = time.time()
    done = subprocess.run(["ctest", "--output-junit", "junit.xml"], cwd=build, capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode != 0  # one test failed
    res = collect_junit(tmp_path, "build/*.xml", started)
    assert res.files == ["build/junit.xml"]
    c = res.counts
    assert c is not None and _counts(c) == RECORDED["ctest.xml"][0]
    assert c.failed_ids == ["fails_on_purpose"] and c.passed_ids == ["adds"]


# --- hostile and broken documents ----------------------------------------------------------------

BILLION_LAUGHS = b"""<?xml version="1.0"?>
<!DOCTYPE lolz [
 <!ENTITY lol "lol">
 <!ENTITY lol1 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol2 "&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
 <!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
 <!ENTITY lol5 "&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;">
 <!ENTITY lol6 "&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;">
 <!ENTITY lol7 "&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;">
 <!ENTITY lol8 "&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;">
 <!ENTITY lol9 "&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;">
]>
<testsuite name="&lol9;"><testcase classname="x" name="&lol9;"/></testsuite>
"""


def test_billion_laughs_is_refused_unexpanded() -> None:
    tracemalloc.start()
    try:
        with pytest.raises(JUnitError) as err:
            parse_junit(BILLION_LAUGHS, "reports/lol.xml")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert "DTD" in str(err.value) and err.value.source == "reports/lol.xml"
    assert peak < 5 << 20  # expanded, the name alone would be ~3 GB


def test_external_entity_is_refused_and_not_read(tmp_path: Path) -> None:
    secret = tmp_path / "secret.xml"
    secret.write_text('<testcase classname="leak" name="SECRET"/>', encoding="utf-8")
    for doc in (
        f'<?xml version="1.0"?><!DOCTYPE t [<!ENTITY ext SYSTEM "file://{secret}">]>'
        '<testsuite name="s">&ext;</testsuite>',
        f'<?xml version="1.0"?><!DOCTYPE testsuite SYSTEM "file://{secret}"><testsuite name="s"/>',
        '<?xml version="1.0"?><!DOCTYPE t [<!ENTITY % p SYSTEM "http://127.0.0.1:9/x.dtd"> %p;]><testsuite/>',
    ):
        with pytest.raises(JUnitError) as err:
            parse_junit(doc.encode())
        assert "SECRET" not in str(err.value)
        assert "refused" in str(err.value)


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"", "malformed XML"),
        (b"   \n", "malformed XML"),
        (b'<?xml version="1.0"?><testsuite name="s"><testcase name="a">', "malformed XML"),  # truncated
        ((DATA / "nextest.xml").read_bytes()[:700], "malformed XML"),  # a real report cut mid-way
        (b'<testsuite><testcase name="a"></testsuite>', "malformed XML"),  # mismatched tag
        (b'<testsuite name="&undefined;"/>', "malformed XML"),  # entity never declared
        (b"\x00\x01\x02binary", "malformed XML"),
        (b'<?xml version="1.0" encoding="no-such-codec"?><testsuite/>', "unreadable XML"),
        (b"<html><body>502 Bad Gateway</body></html>", "not a JUnit report"),
        (b'<assemblies><assembly name="x"/></assemblies>', "not a JUnit report"),  # xUnit.net v2
        (b"<testsuite/>" + b"<x/>", "malformed XML"),  # two roots
    ],
)
def test_malformed_or_foreign_xml_is_an_error(data: bytes, reason: str) -> None:
    with pytest.raises(JUnitError) as err:
        parse_junit(data, "r.xml")
    assert reason in str(err.value) and str(err.value).startswith("r.xml: ")


def test_too_deep_and_too_large_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    deep = b"<testsuites>" + b"<testsuite>" * junit.MAX_DEPTH + b"</testsuite>" * junit.MAX_DEPTH + b"</testsuites>"
    with pytest.raises(JUnitError, match="nested deeper"):
        parse_junit(deep)
    monkeypatch.setattr(junit, "MAX_FILE_BYTES", 1000)
    with pytest.raises(JUnitError, match="larger than"):
        parse_junit(b"<testsuite>" + b" " * 1000 + b"</testsuite>")


def test_structure_rules() -> None:
    """Bare <testsuite>, nested suites, namespaces, attribute fallback, UTF-16, id shapes."""
    doc = """<?xml version="1.0" encoding="UTF-16"?>
<testsuites xmlns="urn:example">
  <testsuite name="outer" tests="99" failures="99">
    <testsuite name="inner">
      <testcase classname="pkg.A" name="ok"/>
      <testcase classname="pkg.A" name="bad"><failure message="x"/><error message="y"/></testcase>
      <testcase name="lonely"><skipped/></testcase>
      <testcase classname="pkg.A" name="nested"><testcase name="not-counted"><failure/></testcase></testcase>
    </testsuite>
  </testsuite>
  <testsuite name="counted-from-attributes" tests="5" failures="1" errors="1" skipped="1" disabled="1"/>
  <testsuite name="empty" tests="0"/>
  <testsuite name="nonsense" tests="-3" failures="x"/>
</testsuites>""".encode("utf-16")
    c = parse_junit(doc)
    # cases: ok, nested (passed), bad (failed wins over error), lonely (skipped); then 5 from attributes
    assert _counts(c) == (2 + 1, 1 + 1, 1, 1 + 2)
    assert c.failed_ids == ["pkg.A.bad"] and c.passed_ids == ["pkg.A.ok", "pkg.A.nested"]

    bare = parse_junit(b'<testsuite tests="2" failures="1"/>')
    assert _counts(bare) == (1, 1, 0, 0) and bare.failed_ids == []

    ids = parse_junit(
        b'<testsuite>'
        b'<testcase classname="tests.test_x.TestA" name="test_y" file="tests/test_x.py"><failure/></testcase>'
        b'<testcase classname="tests.test_x" name="test_z" file="./tests/test_x.py"><error/></testcase>'
        b'<testcase classname="src/a.test.js" name="adds" file="src/a.test.js"><failure/></testcase>'
        b'<testcase classname="Other" name="t" file="lib\\b_test.exs"><failure/></testcase>'
        b'<testcase classname="C" name="abs" file="/home/u/p/t.php"><failure/></testcase>'
        b'<testcase classname="suite" name="suite does it"><failure/></testcase>'
        b'<testcase name="disabled" status="disabled"/>'
        b'</testsuite>'
    )
    assert ids.failed_ids == [
        "tests/test_x.py::TestA::test_y",
        "tests/test_x.py::test_z",
        "src/a.test.js::adds",
        "lib/b_test.exs::Other.t",
        "C.abs",
        "suite does it",
    ]
    assert ids.skipped == 1


def test_ids_are_capped() -> None:
    cases = b"".join(b'<testcase classname="C" name="t%d"><failure/></testcase>' % i for i in range(MAX_IDS + 50))
    c = parse_junit(b"<testsuite>" + cases + b"</testsuite>")
    assert c.failed == MAX_IDS + 50 and len(c.failed_ids) == MAX_IDS and c.failed_ids[0] == "C.t0"


_FRAGMENTS = st.sampled_from([
    "<testsuites>", "</testsuites>", "<testsuite ", 'tests="3" ', 'failures="1" ', 'skipped="x" ', ">", "/>",
    "</testsuite>", "<testcase ", 'name="a" ', 'classname="b.c" ', 'file="f.py" ', "<failure/>", "<error>",
    "</error>", "<skipped/>", "</testcase>", "<flakyFailure/>", "<![CDATA[x]]>", "&amp;", "&lol;", "<!--c-->",
    "<!DOCTYPE x>", '<!ENTITY a "b">', "<?pi?>", '<?xml version="1.0"?>', "\x00", "é", "\ufeff", "<", "&", '"',
])


@given(st.one_of(st.binary(max_size=300), st.lists(_FRAGMENTS, max_size=40).map(lambda xs: "".join(xs).encode())))
@settings(max_examples=400, deadline=None)
def test_fuzz_parse_junit_returns_counts_or_junit_error(data: bytes) -> None:
    try:
        c = parse_junit(data, "fuzz.xml")
    except JUnitError as err:
        assert str(err).startswith("fuzz.xml: ")
        return
    assert isinstance(c, TestCounts) and c.runner == "junit"
    assert min(c.passed, c.failed, c.errors, c.skipped) >= 0
    assert len(c.failed_ids) <= c.failed + c.errors


# --- collect_junit -------------------------------------------------------------------------------

GOOD = b'<testsuite><testcase classname="A" name="ok"/><testcase classname="A" name="bad"><failure/></testcase></testsuite>'


def _report(path: Path, data: bytes = GOOD, mtime: float | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    if mtime is not None:
        os.utime(path, (mtime, mtime))


def test_collect_sums_files_and_names_stale_ones(tmp_path: Path) -> None:
    started = time.time()
    _report(tmp_path / "build/test-results/test/TEST-A.xml")
    _report(tmp_path / "build/test-results/test/TEST-B.xml",
            b'<testsuite><testcase classname="B" name="ok"/><testcase classname="B" name="s"><skipped/></testcase></testsuite>')
    _report(tmp_path / "build/test-results/other/TEST-Old.xml", mtime=started - 3600)
    res = collect_junit(tmp_path, "build/test-results/**/*.xml", started)
    assert res.files == ["build/test-results/test/TEST-A.xml", "build/test-results/test/TEST-B.xml"]
    assert res.stale == ["build/test-results/other/TEST-Old.xml"] and res.errors == []
    assert res.counts is not None and _counts(res.counts) == (2, 1, 0, 1)
    assert res.counts.failed_ids == ["A.bad"] and res.counts.passed_ids == ["A.ok", "B.ok"]
    assert "read 2 files (4 tests" in res.note
    assert "ignored 1 stale file older than the check's start: build/test-results/other/TEST-Old.xml" in res.note


def test_collect_only_stale_files_gives_no_counts(tmp_path: Path) -> None:
    started = time.time()
    _report(tmp_path / "target/surefire-reports/TEST-x.xml", mtime=started - 60)
    res = collect_junit(tmp_path, "target/surefire-reports/TEST-*.xml", started)
    assert res.counts is None and res.files == [] and res.stale == ["target/surefire-reports/TEST-x.xml"]
    assert "no file written by this run could be read" in res.note and "TEST-x.xml" in res.note


def test_collect_refuses_symlinks_outside_the_project(tmp_path: Path) -> None:
    project, outside = tmp_path / "project", tmp_path / "outside"
    _report(outside / "junit.xml")
    (project / "reports").mkdir(parents=True)
    (project / "reports" / "junit.xml").symlink_to(outside / "junit.xml")
    (project / "linked").symlink_to(outside, target_is_directory=True)
    _report(project / "reports" / "own.xml")
    started = time.time() - 10
    res = collect_junit(project, "reports/*.xml", started)
    assert res.files == ["reports/own.xml"]
    assert res.errors == ["reports/junit.xml: refused, it resolves outside the project (symlink)"]
    res = collect_junit(project, "linked/*.xml", started)
    assert res.counts is None and res.errors == ["linked/junit.xml: refused, it resolves outside the project (symlink)"]
    assert res.note == ("JUnit XML (linked/*.xml): no file written by this run could be read; "
                        "not used: linked/junit.xml: refused, it resolves outside the project (symlink).")


@pytest.mark.parametrize("pattern", ["../other/*.xml", "reports/../../x.xml", "/etc/*.xml", "C:\\reports\\*.xml",
                                     "~/x.xml", "", "  ", "**x/*.xml"])
def test_collect_rejects_bad_patterns(tmp_path: Path, pattern: str) -> None:
    with pytest.raises(ValueError, match="junitXml"):
        collect_junit(tmp_path, pattern, time.time())


def test_collect_no_match_malformed_and_missing_project(tmp_path: Path) -> None:
    res = collect_junit(tmp_path, "reports/*.xml", time.time())
    assert res.counts is None and res.files == [] and res.errors == []
    assert res.note == "JUnit XML (reports/*.xml): no file matched."

    started = time.time() - 10
    _report(tmp_path / "reports" / "good.xml")
    _report(tmp_path / "reports" / "cut.xml", GOOD[:40])
    _report(tmp_path / "reports" / "lol.xml", BILLION_LAUGHS)
    (tmp_path / "reports" / "dir.xml").mkdir()  # not a file: skipped silently
    res = collect_junit(tmp_path, "reports\\*.xml", started)  # backslashes read as /
    assert res.files == ["reports/good.xml"] and res.counts is not None and res.counts.total == 2
    assert [e.split(":")[0] for e in res.errors] == ["reports/cut.xml", "reports/lol.xml"]
    assert "malformed XML" in res.errors[0] and "refused: a DTD" in res.errors[1]

    missing = collect_junit(tmp_path / "does-not-exist", "*.xml", time.time())
    assert missing.counts is None and missing.note.endswith("no file matched.")


def test_collect_caps_files_and_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    started = time.time() - 10
    for i in range(5):
        _report(tmp_path / "r" / f"{i}.xml")
    monkeypatch.setattr(junit_files, "MAX_FILES", 3)
    res = collect_junit(tmp_path, "r/*.xml", started)
    assert res.files == ["r/0.xml", "r/1.xml", "r/2.xml"]
    assert res.errors == ["r/*.xml: 5 files matched; only the first 3 were considered"]
    monkeypatch.setattr(junit_files, "MAX_FILES", 1000)
    monkeypatch.setattr(junit_files, "MAX_TOTAL_BYTES", 2 * len(GOOD))
    res = collect_junit(tmp_path, "r/*.xml", started)
    assert res.files == ["r/0.xml", "r/1.xml"] and len(res.errors) == 3
    assert all("in total" in e for e in res.errors)
    monkeypatch.setattr(junit_files, "MAX_TOTAL_BYTES", 256 << 20)
    monkeypatch.setattr(junit_files, "MAX_ENTRIES", 4)  # break-test: the count said "4,001 files matched"
    res = collect_junit(tmp_path, "r/*.xml", started)
    assert len(res.files) == 4 and res.errors == [
        "r/*.xml: more than 4 entries matched, the search stopped there; only the first 4 files were considered"]
