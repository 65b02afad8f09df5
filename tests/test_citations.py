"""Every citation in the repository resolves inside it.

The code, README, design notes, skill documents and tests cite behaviour contracts as
``docs/<file>.md §<number>`` (``docs/prefect-facts.md P<number>`` for the Prefect facts). Two
rules, checked over the tracked text files that ``scripts/rewrite_citations.py`` scans:

(a) no reference to a document outside the repository remains: the old spec names
    (``10-tools §3.3``), ``shared/spec`` paths, the seeds, and the project tracker's issues
    (``issue 23 §5``, ``hosting issue``, ``must-show 6``, …). Ordinary words stay ordinary: a
    report's ``blockingIssues`` / "blocking issue", a directive's ``issue`` field, an upstream
    project's ``issue #460``;
(b) every ``docs/<file>.md`` citation resolves: the file exists, and each cited number is the first
    token of one of its Markdown headings (``### 3.3 wait_task``, ``## 3.3. …``, ``### P3 …``).
    A range (``§3.0–§3.5``) checks both ends; ``§1.11.8–9`` ends at ``1.11.9``; a citation
    wrapped over two lines (``docs/tools.md`` at the end of one, ``§3.3`` at the start of the next)
    is one citation.

The tests of the resolver itself come first; the tree's come last.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SELF = "tests/test_citations.py"
SCRIPT = "scripts/rewrite_citations.py"


def _script():
    spec = importlib.util.spec_from_file_location("rewrite_citations", ROOT / SCRIPT)
    assert spec and spec.loader, SCRIPT
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("rewrite_citations", mod)
    spec.loader.exec_module(mod)
    return mod


REQUIRED_DOCS = (
    # written from the spec files
    "docs/architecture.md", "docs/tools.md", "docs/acceptance.md", "docs/visual.md",
    "docs/agents-tasks.md", "docs/prefect-facts.md",
    # the feature documents the tracker's issues became
    "docs/main-job.md", "docs/hosting.md", "docs/robustness.md", "docs/lifecycle.md",
    "docs/agent-adapters.md", "docs/isolation.md", "docs/host-parity.md", "docs/toolchains.md",
    "docs/integrity.md", "docs/real-agents.md",
)
"""The documents that replace the outside ones (the rewrite cites each of them)."""

# --- (a) references to documents outside the repository -----------------------------------------

_NICKNAMES = r"walking-skeleton|acceptance|hosting|input|lifecycle|webhook|scale-out|FIFO"
"""The tracker issues' nicknames as the code used them (``hosting issue``); ``blocking`` is not
one: a blocking issue is what a report lists."""

OUTSIDE: list[tuple[str, re.Pattern[str]]] = [
    ("spec file", re.compile(
        r"\b(?:00-design|10-tools|20-acceptance|30-visual|40-agents-tasks|50-prefect-lab)\b")),
    ("spec path", re.compile(r"shared/spec|\.\./shared/")),
    ("seed", re.compile(r"\bseeds/|\bseed \d{3}\b|\bthe seed's\b")),
    ("tracker issue", re.compile(r"\b[Ii]ssues?[ -]\d+\b")),
    ("tracker issue", re.compile(
        rf"\b(?:{_NICKNAMES})(?:/(?:{_NICKNAMES}))?(?:[ \t]+|[ \t]*\n[ \t]*#?[ \t]*)issue\b")),
    ("tracker issue", re.compile(r"\bissue[ \t]*(?:\n[ \t]*#?[ \t]*)?§")),
    ("tracker issue", re.compile(r"\bmust-shows?\b", re.I)),
    ("tracker issue", re.compile(
        r"\bthe issue's (?:closing note|report|goal)\b|\bthe issue (?:asks|overrides|says)\b|\bissue \"[A-Z]"
        r"|\bclosing note\b")),
]
"""(what, pattern): text that refers to a document a clone does not have."""


def outside_references(text: str) -> list[tuple[int, str, str]]:
    """``[(line, what, text)]`` of every reference to an outside document in ``text``."""
    out = []
    for what, pattern in OUTSIDE:
        for m in pattern.finditer(text):
            out.append((text.count("\n", 0, m.start()) + 1, what, m.group(0).replace("\n", "⏎")))
    return sorted(out)


@pytest.mark.parametrize("text", [
    "the hosting issue §6", "(FIFO issue)", "(lifecycle issue, must-show 6)", "issue 23 §5", "Issue 13 (toolchains)",
    "the issue-24 fields", "10-tools §3.3", "see ../shared/spec/00-design.md", "50-prefect-lab P3",
    "(issue §8)", "scale-out\n    issue §2", "must-shows 4–5", "seed 003's events", "input issue",
    "the issue's closing note", "walking-skeleton issue §2–§3", "issues 2 and 3",
])
def test_an_outside_reference_is_found(text: str) -> None:
    assert outside_references(text), text


@pytest.mark.parametrize("text", [
    "blocking issues fail the round", "report['blockingIssues']", "for issue in blocking:",
    "a blocking issue that a person resolves", "``{file?, line?, issue, action, source}``",
    "the repro of issue #460", "- <file>:<line> — <issue> → <action>", "docs/tools.md §3.3",
    "no issue is just the test's name", "the seed state of a task", "design note 50",
    "(path = the issue's dotted path)",
])
def test_ordinary_words_are_not_outside_references(text: str) -> None:
    assert not outside_references(text), text


# --- (b) docs/ citations --------------------------------------------------------------------------

_BREAK = r"[ \t]*(?:\n[ \t]*(?:#|//|\*|>)?[ \t]*)?"
"""Between two parts of one citation: spaces, or one line break and a comment marker."""
_NUM = r"(?:§[ ]?|P)\d+(?:\.\d+)*[a-z]?"
CITATION_RE = re.compile(
    rf"(?<![\w/.-])docs/(?P<file>[A-Za-z0-9_-]+\.md)\b"
    rf"(?P<secs>[ \t]*(?:\n[ \t]*(?:#|//|\*|>)?[ \t]*)?{_NUM}"
    rf"(?:[ \t]*(?:–|-|,|and|or){_BREAK}(?:{_NUM}|(?<=[–-])\d+(?:\.\d+)*))*)?"
)
"""``docs/<file>.md`` and the section numbers that follow it (a list, ranges, one line break)."""


def citations(text: str) -> list[tuple[int, str, list[str]]]:
    """``[(line, file, [numbers])]`` of the ``docs/`` citations in ``text``: ``"3.3"`` for ``§3.3``,
    ``"P3"`` for ``P3``, both ends of a range (``§1.11.8–9`` ends at ``1.11.9``). A path that is a
    whole string literal (``"docs/plan.md"``, a test's data) is not a citation."""
    out = []
    for m in CITATION_RE.finditer(text):
        before, after = text[m.start() - 1:m.start()], text[m.end("file"):m.end("file") + 1]
        if before in "\"'" and before and after == before and not m.group("secs"):
            continue
        nums: list[str] = []
        secs = m.group("secs") or ""
        for tok in re.finditer(r"(?P<sep>–|-)?[ \t]*(?:\n[ \t]*(?:#|//|\*|>)?[ \t]*)?(?P<mark>§[ ]?|P)?"
                               r"(?P<n>\d+(?:\.\d+)*[a-z]?)", secs):
            n = tok.group("n")
            if tok.group("mark") is None:
                if not tok.group("sep") or not nums:
                    continue
                start = nums[-1].lstrip("P").split(".")
                tail = n.split(".")
                n = ".".join(start[: max(0, len(start) - len(tail))] + tail)
            nums.append(("P" if (tok.group("mark") or "").startswith("P") else "") + n)
        out.append((text.count("\n", 0, m.start()) + 1, "docs/" + m.group("file"), nums))
    return out


def headings(markdown: str) -> set[str]:
    """The first token of every Markdown heading outside fenced code, without a trailing ``.`` or
    ``:`` (``### 3.3 wait_task`` → ``3.3``)."""
    out, fenced = set(), False
    for line in markdown.split("\n"):
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
            continue
        m = None if fenced else re.match(r"^#{1,6}[ \t]+(\S+)", line)
        if m:
            out.add(m.group(1).rstrip(".:"))
    return out


def unresolved(root: Path, files: list[str]) -> list[str]:
    """``file:line: citation`` for each ``docs/`` citation in ``files`` (relative to ``root``) whose
    document is missing or has no heading for a cited number."""
    cache: dict[str, set[str] | None] = {}
    problems = []
    for name in files:
        text = (root / name).read_text(encoding="utf-8")
        for line, doc, nums in citations(text):
            if doc not in cache:
                p = root / doc
                cache[doc] = headings(p.read_text(encoding="utf-8")) if p.is_file() else None
            heads = cache[doc]
            if heads is None:
                problems.append(f"{name}:{line}: {doc} does not exist")
                continue
            missing = [n for n in nums if n not in heads]
            if missing:
                problems.append(f"{name}:{line}: {doc} has no heading " + ", ".join(
                    ("" if n.startswith("P") else "§") + n for n in missing))
    return problems


def _doc(tmp_path: Path, name: str, text: str) -> None:
    (tmp_path / "docs").mkdir(exist_ok=True)
    (tmp_path / "docs" / name).write_text(text, encoding="utf-8")


TOOLS_MD = ("# Tools\n\n## 3 Semantics\n\n### 3.3 wait_task\n\n### 3.4. query_task\n\n"
            "```\n# 9.9 not a heading\n```\n")


def test_a_citation_of_an_existing_heading_resolves(tmp_path: Path) -> None:
    _doc(tmp_path, "tools.md", TOOLS_MD)
    (tmp_path / "a.py").write_text('"""Waits (docs/tools.md §3.3, §3.4; docs/tools.md)."""\n', encoding="utf-8")
    assert citations((tmp_path / "a.py").read_text()) == [(1, "docs/tools.md", ["3.3", "3.4"]),
                                                          (1, "docs/tools.md", [])]
    assert unresolved(tmp_path, ["a.py"]) == []


def test_a_missing_heading_or_document_is_named_with_its_line(tmp_path: Path) -> None:
    _doc(tmp_path, "tools.md", TOOLS_MD)
    (tmp_path / "a.md").write_text("intro\nsee docs/tools.md §9.9 and docs/nope.md\n", encoding="utf-8")
    assert unresolved(tmp_path, ["a.md"]) == ["a.md:2: docs/tools.md has no heading §9.9",
                                              "a.md:2: docs/nope.md does not exist"]


def test_a_line_wrapped_citation_is_one_citation(tmp_path: Path) -> None:
    _doc(tmp_path, "tools.md", TOOLS_MD)
    code = "x = 1  # the wait of docs/tools.md\n# §3.3 and more\ny = 2  # docs/tools.md\n#   §7 wrapped\n"
    (tmp_path / "a.py").write_text(code, encoding="utf-8")
    assert [c[2] for c in citations(code)] == [["3.3"], ["7"]]
    assert unresolved(tmp_path, ["a.py"]) == ["a.py:3: docs/tools.md has no heading §7"]
    doc = '"""Waits for a task (docs/tools.md\n    §3.3)."""\n'
    assert citations(doc) == [(1, "docs/tools.md", ["3.3"])]


def test_ranges_lists_and_p_items() -> None:
    assert citations("docs/acceptance.md §3.0–§3.5, §5") == [(1, "docs/acceptance.md", ["3.0", "3.5", "5"])]
    assert citations("docs/agents-tasks.md §1.11.8–9") == [(1, "docs/agents-tasks.md", ["1.11.8", "1.11.9"])]
    assert citations("(docs/isolation.md §1, §4.1 and §4.3)") == [(1, "docs/isolation.md", ["1", "4.1", "4.3"])]
    assert citations("docs/prefect-facts.md P3") == [(1, "docs/prefect-facts.md", ["P3"])]
    assert citations("docs/visual.md §3 step 8, §3.1") == [(1, "docs/visual.md", ["3"])]
    assert citations('{"planDoc": "docs/missing-plan.md"}') == []
    assert headings("## P3 Flow runs\n### 2.6 Meta\n## 10. Reports\n") == {"P3", "2.6", "10"}


def test_the_rewrite_of_old_citations() -> None:
    rc = _script()
    got: list[str] = []
    assert rc.rewrite_text("x.py", "(10-tools §3.3, 40-agents-tasks §2.3–§2.4)", got) == \
        "(docs/tools.md §3.3, docs/agents-tasks.md §2.3–§2.4)"
    assert rc.rewrite_text("x.py", "# wait (10-tools\n# §3.3)", got) == "# wait (docs/tools.md\n# §3.3)"
    assert rc.rewrite_text("x.py", "see `../shared/spec/00-design.md`", got) == "see `docs/architecture.md`"
    assert rc.rewrite_text("x.py", "(50-prefect-lab P3)", got) == "(docs/prefect-facts.md P3)"
    assert rc.rewrite_text("x.py", "(issue 23 §5)", got) == "(docs/integrity.md §5)"
    assert rc.rewrite_text("x.py", "(lifecycle issue, must-show 6)", got) == "(docs/lifecycle.md §6)"
    assert rc.rewrite_text("x.py", "(scale-out issue §1, must-shows 1 and 3)", got) == \
        "(docs/isolation.md §1, §4.1 and §4.3)"
    assert rc.rewrite_text("x.py", "(issue 13,\nmust-show 3)", got) == "(docs/toolchains.md\n§3)"
    assert rc.rewrite_text("acceptance/x.py", "(20-acceptance §4.2, issue §6)", got) == \
        "(docs/acceptance.md §4.2, docs/acceptance.md §8.6)"
    assert rc.rewrite_text("x.py", "blocking issue; issue #460", got) == "blocking issue; issue #460"
    assert got == []
    once = rc.rewrite_text("x.py", "(hosting issue §6; 00-design §3)", got)
    assert rc.rewrite_text("x.py", once, got) == once == "(docs/hosting.md §6; docs/architecture.md §3)"


# --- the tree -----------------------------------------------------------------------------------


def _tree_files() -> list[str]:
    return [f for f in _script().tracked_files(ROOT) if f not in (SELF, SCRIPT)]


def test_no_reference_to_a_document_outside_the_repository() -> None:
    problems = []
    for name in _tree_files():
        try:
            text = (ROOT / name).read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        problems += [f"{name}:{line}: {what}: {hit}" for line, what, hit in outside_references(text)]
    assert not problems, "references to documents outside the repository " \
        "(run scripts/rewrite_citations.py):\n" + "\n".join(problems)


def test_the_documents_that_replace_the_outside_ones_exist() -> None:
    missing = [d for d in REQUIRED_DOCS if not (ROOT / d).is_file()]
    assert not missing, f"missing: {missing}"


def test_every_docs_citation_resolves() -> None:
    files = []
    for name in _tree_files():
        try:
            (ROOT / name).read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        files.append(name)
    problems = unresolved(ROOT, files)
    assert not problems, "citations that do not resolve:\n" + "\n".join(problems)
