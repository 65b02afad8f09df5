"""unittest (``python -m unittest``): counts (``Ran N tests``, ``-v``) and the zero-test rule
(``Ran 0 tests`` exits 0 on Python 3.11).
"""

from __future__ import annotations

import re

from .base import CountFormat, TestCounts, TestInfra, Toolchain

_UNITTEST_RAN = re.compile(r"^Ran (\d+) tests? in ", re.M)

_UNITTEST_RAN_FULL = re.compile(r"^Ran (\d+) tests? in [\d.]+s\s*$", re.M)
_UNITTEST_STATUS = re.compile(r"^(OK|FAILED|NO TESTS RAN)(?: \(([^)]*)\))?\s*$", re.M)
_UNITTEST_FAIL_HEAD = re.compile(r"^(?:FAIL|ERROR|UNEXPECTED SUCCESS): (.+?)\s*$", re.M)
_UNITTEST_VERBOSE = re.compile(
    r"^(\w+ \([\w.]+\)(?: \([^\n]*\))?) \.\.\. (ok|FAIL|ERROR|skipped\b.*|expected failure|unexpected success)\s*$", re.M
)


def _parse_unittest(text: str) -> TestCounts | None:
    runs = list(_UNITTEST_RAN_FULL.finditer(text))
    if not runs:
        return None
    ran = sum(int(m.group(1)) for m in runs)
    failures = errors = skipped = xfail = xpass = 0
    for m in _UNITTEST_STATUS.finditer(text, runs[0].start()):
        for k, v in re.findall(r"(\w[\w ]*?)=(\d+)", m.group(2) or ""):
            k = k.strip()
            if k == "failures":
                failures += int(v)
            elif k == "errors":
                errors += int(v)
            elif k == "skipped":
                skipped += int(v)
            elif k == "expected failures":
                xfail += int(v)
            elif k == "unexpected successes":
                xpass += int(v)
    failed_ids = [m.group(1) for m in _UNITTEST_FAIL_HEAD.finditer(text)]
    passed_ids = [m.group(1) for m in _UNITTEST_VERBOSE.finditer(text) if m.group(2) == "ok"]
    return TestCounts(
        "unittest",
        passed=max(0, ran - failures - errors - skipped - xfail - xpass),
        failed=failures + xpass,
        skipped=skipped + xfail,
        errors=errors,
        failed_ids=failed_ids,
        passed_ids=passed_ids,
    )


def _zero(text: str) -> bool:
    """Every ``Ran N tests`` line has N == 0."""
    ran = [int(n) for n in _UNITTEST_RAN.findall(text)]
    return bool(ran) and all(n == 0 for n in ran)



def _id_argv(argv: list[str]) -> list[str]:
    """``-v`` after ``unittest`` (every test's ``name (module.Class.name) ... ok`` line)."""
    for i, a in enumerate(argv):
        if a == "unittest" and i > 0 and argv[i - 1] == "-m":
            return [*argv[: i + 1], *(["discover"] if i + 1 < len(argv) and argv[i + 1] == "discover" else []),
                    "-v", *argv[i + 1 + (1 if i + 1 < len(argv) and argv[i + 1] == "discover" else 0):]]
    return list(argv)


INFRA = TestInfra(files=("test*.py", "**/tests/**", "**/test/**"), id_argv=_id_argv)
"""unittest's test infrastructure: modules its default discovery pattern finds, test packages."""

TOOLCHAIN = Toolchain(
    id="unittest",
    order=65,
    test_command=re.compile(r"\bunittest\b"),  # port: so unittest's "Ran 0 tests" (exit 0 on 3.11) is caught too
    hint=re.compile(r"\bunittest\b"),
    hint_formats=("unittest",),
    formats=(CountFormat("unittest", _parse_unittest, 20),),
    zero=_zero,
    infra=INFRA,
)
