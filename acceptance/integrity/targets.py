"""Target tests (docs/integrity.md §3): the tests a brief names, or ``targetTests`` lists, must exist, run
and pass where the round is judged; a target that is missing is a failure, not a pass.

A target matches a test id when it is the id (in any runner's form), or a single name equal to
one of the id's components (a test, class, module or package name: ``TestCalc`` targets every test
of that class), or the id starts with the target followed by a separator (a file:
``tests/test_calc.py`` targets every test in it). Brief targets are the baseline tests the brief names (:func:`..grading.is_targeted`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Sequence

from ...core.i18n import _
from ..grading.grade import is_targeted

__all__ = ["Target", "TargetStatus", "brief_targets", "match", "judge_target"]

_PARAMS = re.compile(r"\[.*\]$")


def _parts(test_id: str) -> list[str]:
    """The components of an id in any runner's form, parameters stripped: ``tests/test_calc.py::
    TestX::test_y[1]`` → ``[tests, test_calc, TestX, test_y]``."""
    return [p.strip() for p in re.split(r"\.| > | › ", _normal(_PARAMS.sub("", test_id.strip()))) if p.strip()]


def _name(test_id: str) -> str:
    parts = _parts(test_id)
    return parts[-1] if parts else ""


def _normal(text: str) -> str:
    """A pytest node id, a unittest ``name (module.Class.name)`` line and a dotted JUnit id all
    reduce to their dotted path."""
    m = re.match(r"^(\w+) \(([\w.]+)\)", text)
    if m:
        text = m.group(2)
    text = re.sub(r"\.py(?=::|$)", "", text).replace("::", ".").replace("/", ".")
    return text


def match(target: str, test_id: str) -> bool:
    """Whether ``target`` names ``test_id`` (see the module doc)."""
    t, i = target.strip(), test_id.strip()
    if not t:
        return False
    if t == i or _normal(t) == _normal(i):
        return True
    single = not re.search(r"::|/| > | › |\.|\s", t)
    if single and t in _parts(i):
        return True  # a test, class, module or package name
    if _name(t) and _name(t) == _name(i) and not single and _normal(i).endswith(_normal(t)):
        return True
    ni, nt = _normal(i), _normal(t)
    return ni.startswith(nt + ".") or i.startswith(t.rstrip("/") + "/") or i.startswith(t + "::")


@dataclass
class Target:
    """One target and where it came from (``brief`` or ``targetTests``)."""

    target: str
    source: str


class TargetStatus:
    """A target's verdict: ``passed``, ``failed``, ``missing`` (never ran where judged)."""

    PASSED = "passed"
    FAILED = "failed"
    MISSING = "missing"


def _named(test_id: str, task_text: str) -> bool:
    """The brief names this test itself (its id or its test name), not just its file."""
    name = _name(test_id)
    for t in (test_id, name if len(name) >= 4 else ""):
        if t and re.search(rf"(?<![\w./-]){re.escape(t)}(?![\w/-])", task_text):
            return True
    return False


def brief_targets(task_text: str, baseline_ids: Iterable[str]) -> list[Target]:
    """The baseline tests the brief names, as targets: those it names by id or test name; a test
    file it names counts whole only when it names none of that file's tests."""
    ids = sorted(set(baseline_ids))
    hit = [t for t in ids if is_targeted(t, task_text)] if task_text else []
    named = {t for t in hit if _named(t, task_text)}
    named_files = {t.split("::", 1)[0] for t in named}
    return [Target(t, "brief") for t in hit if t in named or t.split("::", 1)[0] not in named_files]


def judge_target(target: str, passed: Sequence[str], failed: Sequence[str]) -> tuple[str, list[str]]:
    """``(status, matching ids)`` of one target against one run's passed and failed ids: failed
    when any matching test failed, passed when some matched and all passed, else missing."""
    bad = [i for i in failed if match(target, i)]
    if bad:
        return TargetStatus.FAILED, bad
    good = [i for i in passed if match(target, i)]
    return (TargetStatus.PASSED, good) if good else (TargetStatus.MISSING, [])


def describe(status: str) -> str:
    """The words for a target's status in a blocking issue."""
    return {TargetStatus.FAILED: _("failed"), TargetStatus.MISSING: _("is missing or did not run")}.get(status, status)
