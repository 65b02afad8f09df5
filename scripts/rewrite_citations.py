#!/usr/bin/env python3
"""Rewrite citations of documents that live outside the repository into citations of ``docs/``.

The code, the README, the design notes, the skill documents and the tests used to cite behaviour
contracts a clone cannot open: the spec files (``00-design §6``, ``10-tools §3.3``,
``../shared/spec/00-design.md``, ``50-prefect-lab P3``, …) and issues of the project's tracker
(``issue 23 §5``, ``hosting issue §6``, ``lifecycle issue, must-show 6``, ``input issue``, …).
Their content now lives in ``docs/``, one file per area; this script turns every old citation into
the new form ``docs/<file>.md §<number>`` (``docs/prefect-facts.md P<number>`` for the Prefect
facts).

* Spec citations are rewritten mechanically (:data:`SPEC_DOCS`); their section numbers are kept.
* Issue citations go through :data:`ISSUES` (which document holds an issue, and where its ``§N``
  and its ``must-show N`` items went), :data:`NICKNAMES` (``hosting issue`` → issue 6, …) and
  :data:`PHRASES` (sentences that need more than a mechanical rewrite); a nickname without a number
  gets its section from the words around it (:data:`REFINE`, :data:`REFINE_AROUND`). A bare
  ``issue §N`` belongs to the issue :data:`FILE_CONTEXT` gives for its file; a bare ``must-show N``
  to the nearest issue citation before it in the same file, else to the file's.
* A prose line (a comment, a docstring, Markdown) that the rewrite pushes over
  :data:`LINE_LIMIT` characters is re-wrapped into the lines of its paragraph that follow it; a
  one-line docstring becomes a two-line one; a ``# --- title ---`` rule keeps its width.
* Files generated from docstrings (:data:`GENERATED`: the published acceptance schema) are
  regenerated afterwards with the running interpreter, which must import this clone's package.
* Python files must still compile after the rewrite, or the file is left as it was (and named).

Idempotent: a rewritten tree has nothing left to rewrite. It reads ``git ls-files``, so run it from
a clone. Usage::

    python scripts/rewrite_citations.py           # rewrite in place, list what changed
    python scripts/rewrite_citations.py --check   # only list what it would change (exit 1 if any)
"""

from __future__ import annotations

import argparse
import difflib
import fnmatch
import io
import re
import subprocess
import sys
import tokenize
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# --- what is scanned --------------------------------------------------------------------------

SCANNED = ("*.py", "*.md", "*.sh", "*.toml", "*.json", "*.mjs", "*.txt", "*.cfg", "*.ini", "*.yml",
           "*.yaml", ".ci/*", "skills/*", "tests/*")
"""Tracked files whose names match one of these are scanned (binary files are skipped)."""

SKIPPED = (".venv/*", "test-artifacts/*", "tests/data/*", "*.po", "*.pot", "*.mo", "*.png", "*.lock",
           "*package-lock.json")
"""Never scanned: the environment, artifacts, recorded third-party outputs, the catalogue."""

SELF = ("scripts/rewrite_citations.py", "tests/test_citations.py")
"""This script and its test name the old forms on purpose; they are never rewritten. The documents
under ``docs/`` are scanned like everything else (written in the new form, they have nothing to
rewrite)."""

LINE_LIMIT = 110
"""A prose line longer than this after the rewrite (and not before) is re-wrapped."""

DECORATED_WIDTH = 100
"""The width of a ``# --- title ----…`` rule line whose title the rewrite changed."""

GENERATED: list[tuple[str, str]] = [
    ("acceptance/acceptance.schema.json",
     "import pathlib, sys; import tianshu_mcp.acceptance.schema as s; "
     "root = pathlib.Path(sys.argv[1]).resolve(); "
     "assert root in pathlib.Path(s.__file__).resolve().parents, 'the package is not this clone: ' + s.__file__; "
     "s.write_schema_file()"),
]
"""Files generated from docstrings the rewrite touches, and the Python that regenerates each (run
with this interpreter after a rewrite; the mechanical rewrite of the file stays if that fails)."""

# --- the spec files -------------------------------------------------------------------------------

SPEC_DOCS = {
    "00-design": "docs/architecture.md",
    "10-tools": "docs/tools.md",
    "20-acceptance": "docs/acceptance.md",
    "30-visual": "docs/visual.md",
    "40-agents-tasks": "docs/agents-tasks.md",
    "50-prefect-lab": "docs/prefect-facts.md",
}

# --- the tracker's issues -------------------------------------------------------------------------


@dataclass(frozen=True)
class Issue:
    """Where one tracker issue went.

    ``sec`` formats the issue's own ``§N`` and ``ms`` its ``must-show N`` items as section numbers
    of ``doc`` (``{n}`` is N); ``bare`` is the section a citation without a number gets ("" = the
    whole document).
    """

    title: str
    doc: str
    sec: str = "{n}"
    ms: str = "{n}"
    bare: str = ""


ISSUES: dict[int, Issue] = {
    2: Issue("the main job end to end (walking skeleton)", "docs/main-job.md"),
    3: Issue("the acceptance engine, complete", "docs/acceptance.md", "8.{n}", "8.{n}", "8"),
    6: Issue("hosting that outlives the host", "docs/hosting.md"),
    7: Issue("never a false pass, never a duplicate, never INTERNAL (input)", "docs/robustness.md"),
    8: Issue("task lifecycle on Prefect", "docs/lifecycle.md"),
    9: Issue("agent adapters: CLI, ACP, desktop over CDP", "docs/agent-adapters.md"),
    10: Issue("visual acceptance", "docs/visual.md", "11.{n}", "11.{n}", "11"),
    11: Issue("scale-out: worktree isolation, remote workers", "docs/isolation.md", "{n}", "4.{n}"),
    12: Issue("host parity: tasks extension, structured output, zh, skill install",
              "docs/host-parity.md"),
    13: Issue("toolchains as plugins", "docs/toolchains.md"),
    23: Issue("verification integrity", "docs/integrity.md", "{n}", "8.{n}"),
    24: Issue("real agents, proven", "docs/real-agents.md", "{n}", "6.{n}"),
}
"""Tracker issue → its document. Issues 2, 3, 6–10, 12 and 13 are numbered by their must-show
list (their ``§N`` is must-show N); 11, 23 and 24 by their "what to build" list, with the must-show
list as a numbered section after it."""

NICKNAMES: dict[str, tuple[int, str]] = {
    "walking-skeleton": (2, ""),
    "acceptance": (3, ""),
    "hosting": (6, ""),
    "input": (7, ""),
    "lifecycle": (8, ""),
    "webhook": (8, "3"),
    "scale-out": (11, ""),
}
"""``<nickname> issue`` → (issue, the section a citation without a number gets; "" = the issue's)."""

FILE_CONTEXT: list[tuple[str, int]] = [
    ("acceptance/*", 3),
    ("tests/test_acceptance_*", 3),
]
"""Where a bare ``issue §N`` / ``must-show N`` has no issue citation before it in its file."""

REFINE: dict[str, list[tuple[str, str]]] = {
    "hosting": [
        (r"^[ \t]*[,:][ \t]*\"?instant acceptance", "2"),
        (r"^[ \t]*[,:][ \t]*\"?one home, one Prefect", "3"),
        (r"^[ \t]*[,:][ \t]*(?:\"agents and checks do not|locked-down API)", "4"),
        (r"^[ \t]*[,:][ \t]*errors exit non-zero", "5"),
    ],
    "lifecycle": [(r"^[ \t]*wins: no agent", "5")],
}
"""``<nickname> issue`` without a number, followed by words that name one of its sections."""

REFINE_AROUND: dict[str, list[tuple[str, str]]] = {
    "input": [
        (r"measuring against whatever HEAD|git's refusals", "1"),
        (r"repository-level gate|One repository, one queue|own sub-tree", "3"),
        (r"agent failures are agent|\*\*Agent failures\*\*|agent failure, not a verification"
         r"|an agent that failed is an agent failure", "4"),
        (r"[Hh]ostile input", "6, §8"),
        (r"damaged id", "6"),
        (r"widened by the input issue|data home or inside it|mount points", "7"),
        (r"quoted back", "8"),
        (r"[Ff]uzz", "9"),
        (r"check|rewrote the files it is judged by|unhashed|rules as they were|outlived its task", "10"),
    ],
}
"""``input issue`` without a number: the first pattern found in its line and the line before it
(in the original text) names the section of docs/robustness.md."""

PHRASES: list[tuple[str, str]] = [
    # the design notes' opening line and what "the original" means there
    (r"The architecture is `\.\./shared/spec/00-design\.md`; these are the decisions taken while building it\.",
     "The architecture is `docs/architecture.md`; these are the decisions taken while building it.\n"
     "\"The original\" is the TypeScript tianshu-mcp that this build re-implements; what it did is\n"
     "distilled in `docs/` (one file per area), which also says where this build differs."),
    (r"the Chinese report strings of(\s+)30-visual §10 are issue 12's\.",
     r"the Chinese report strings of\1docs/visual.md §10 come from the catalogue (docs/host-parity.md §3)."),
    (r"The CI run of the issue-12 stop had", "One CI run (docs/host-parity.md work) had"),
    (r"Check the issue-24 fields of a profile\.", "Check the profile fields of docs/real-agents.md."),
    (r"issue-24 facts left out", "facts of docs/real-agents.md left out"),
    (r"a bad issue-24 field", "a bad field of docs/real-agents.md"),
    (r"\(issue \"Repair directives for failed rounds, beyond the original's tsc-only parser\"\)",
     "(docs/acceptance.md §8.7)"),
    (r"extended by the issue \"Repair(\s+)directives for failed rounds, beyond the original's tsc-only parser\"\)",
     r"extended by\1docs/acceptance.md §8.7)"),
    (r"The toolchains added by issue 13 \(must-show 4\)", "The toolchains added by docs/toolchains.md §4"),
    (r"named in the issue's closing note:", "named in docs/lifecycle.md §2:"),
    (r"The issue's report: ``go test -json", "The case of docs/toolchains.md: ``go test -json"),
    (r"against the issue's goal \(≤ 1\.5×", "against the goal of docs/integrity.md §8.6 (≤ 1.5×"),
    (r"The issue asks for no agent and no project change",
     "docs/lifecycle.md §5 asks for no agent and no project change"),
    (r"— the issue overrides it\)", "— docs/agent-adapters.md §2 overrides it)"),
    (r"\(hosting/input issue\)", "(docs/hosting.md, docs/robustness.md §7)"),
    (r"\(issue 10; 30-visual\)", "(docs/visual.md §11)"),
    (r"\(40-agents-tasks §2\.14, issue 12\)", "(docs/agents-tasks.md §2.14, docs/host-parity.md §4)"),
    (r"Issue 13 \(toolchains as plugins\), must-show 5:", "docs/toolchains.md §5 (toolchains as plugins):"),
    (r"seed 003's semantic events", "the semantic events of docs/lifecycle.md §4,"),
    (r"\(seed 003's ", "(docs/lifecycle.md §4: "),
    (r"\(seed 003;", "(docs/lifecycle.md §4;"),
    (r"Reads like the seed's loop:", "Reads like the fix loop of docs/agents-tasks.md §3:"),
    (r"come from the spec and from the original(\s+)TypeScript project's profiles and selector tables",
     r"come from docs/agents-tasks.md §1.7 and §1.11 and from the(\1)profiles and selector tables of the"
     r" original TypeScript tianshu-mcp"),
    # the design notes are numbered list items, cited as "design note N" everywhere else
    (r"docs/design-notes\.md §(\d+)", r"design note \1"),
    # a test that compares the catalogue's Chinese with the spec's wording reads it from docs/
    (r'ROOT\.parent / "shared" / "spec" / "10-tools\.md"', 'ROOT / "docs" / "tools.md"'),
    (r"10-tools\.md's text, or None where the spec is not checked out beside the project"
     r" \(a clean\n(\s*)clone, CI\)",
     r"docs/tools.md's text (it quotes the original's Chinese strings), or None where it is\n\1missing"),
]
"""(regex, replacement) pairs applied first, in this order: sentences whose rewrite is not
mechanical. Each replacement is already in the new form, so a second run finds nothing."""

# --- patterns -----------------------------------------------------------------------------------

_WS = r"[ \t]*(?:\n[ \t]*(?:#[ \t]*)?)?"
"""Whitespace that may hold one line break (and a comment marker) inside a wrapped citation."""
_SEC = r"§[ ]?\d+(?:\.\d+)*[a-z]?"
_SEP = r"[ \t]*(?:–|-|,|and|or)" + _WS
_SECLIST = rf"{_SEC}(?:{_SEP}{_SEC})*"
_NUM = r"\d+[a-z]?"
_MSLIST = rf"[Mm]ust-shows?{_WS}[ \t]*{_NUM}(?:[ \t]*(?:–|-|,|and){_WS}[ \t]*{_NUM})*"
_NICKS = "|".join(sorted(map(re.escape, NICKNAMES), key=len, reverse=True))

ISSUE_RE = re.compile(
    rf"(?:(?P<num>\b[Ii]ssue[ -](?P<n>\d+)\b)(?!['’]s\b)"
    rf"|(?P<nick>\b(?:[Tt]he[ \t]+)?(?P<nn>{_NICKS})(?:[ \t]+|[ \t]*\n[ \t]*(?:#[ \t]*)?)issue\b)"
    rf"|(?P<bare>\bissue(?={_WS}[ \t]*§))"
    rf"|(?P<barems>(?<![\w-])(?={_MSLIST})))"
    rf"(?P<secs>{_WS}[ \t]*{_SECLIST})?"
    rf"(?P<ms>[ \t]*[,;]?{_WS}[ \t]*{_MSLIST})?",
)
"""One issue citation: a head (``issue 23``, ``hosting issue``, a bare ``issue`` before a ``§``, or
nothing before a bare ``must-show``), then its sections, then its must-show items."""

ISSUE_POSSESSIVE_RE = re.compile(r"\bissue (\d+)['’]s\b")
"""``issue 12's`` (a phrase only; no section follows)."""

SPEC_RE = re.compile(r"(?:\.\./)?(?:shared/spec/)?\b(" + "|".join(map(re.escape, SPEC_DOCS)) + r")\b(?:\.md\b)?")

_NEW_ISSUE_DOCS = {i.doc: n for n, i in ISSUES.items() if n not in (3, 10)}
_NEW_CTX_RE = re.compile(r"\b(docs/[a-z-]+\.md)(?:[ \t]+§(\d+))?")


# --- the rewrite ----------------------------------------------------------------------------------


def _map_num(token: str, fmt: str) -> str:
    m = re.fullmatch(r"(\d+)(?:\.(\d+(?:\.\d+)*))?([a-z]?)", token)
    if not m:
        return token
    base = fmt.format(n=m.group(1)) + (f".{m.group(2)}" if m.group(2) else "")
    return base + (f" ({m.group(3)})" if m.group(3) else "")


def _map_secs(text: str, fmt: str) -> str:
    """``§2–§3`` → each number through ``fmt``; separators and line breaks are kept."""
    return re.sub(r"§[ ]?(\d+(?:\.\d+)*[a-z]?)", lambda m: "§" + _map_num(m.group(1), fmt), text)


def _map_ms(text: str, fmt: str) -> str:
    """``must-shows 1 and 3`` → ``§4.1 and §4.3`` (numbers through ``fmt``)."""
    body = re.sub(r"^[Mm]ust-shows?", "", text)
    return re.sub(r"(?<![\w.§])(\d+[a-z]?)", lambda m: "§" + _map_num(m.group(1), fmt), body).lstrip(" \t")


def _file_context(path: str) -> int | None:
    for pattern, issue in FILE_CONTEXT:
        if fnmatch.fnmatch(path, pattern):
            return issue
    return None


def _context_at(path: str, text: str, pos: int, issues_seen: list[tuple[int, int]]) -> int | None:
    """The issue a bare ``must-show N`` at ``pos`` belongs to: the nearest issue citation before it
    in the file (old form, or a new-form citation of an issue's own document), else
    :data:`FILE_CONTEXT`."""
    best: tuple[int, int] | None = None
    for at, issue in issues_seen:
        if at < pos and (best is None or at > best[0]):
            best = (at, issue)
    for m in _NEW_CTX_RE.finditer(text, 0, pos):
        doc, sec = m.group(1), m.group(2)
        issue = _NEW_ISSUE_DOCS.get(doc)
        if doc == "docs/acceptance.md" and sec == "8":
            issue = 3
        if doc == "docs/visual.md" and sec == "11":
            issue = 10
        if issue is not None and (best is None or m.start() > best[0]):
            best = (m.start(), issue)
    if best is not None:
        return best[1]
    return _file_context(path)


def _refined(nick: str, text: str, start: int, end: int) -> str:
    """The section a numberless ``<nick> issue`` at ``text[start:end]`` names by the words around
    it (:data:`REFINE`, :data:`REFINE_AROUND`), or ""."""
    after = text[end:end + 120]
    for pattern, sec in REFINE.get(nick, []):
        if re.search(pattern, after):
            return sec
    this_line = text.rfind("\n", 0, start)
    line_start = text.rfind("\n", 0, this_line) + 1 if this_line > 0 else 0
    line_end = text.find("\n", end)
    around = text[line_start:line_end if line_end >= 0 else len(text)]
    for pattern, sec in REFINE_AROUND.get(nick, []):
        if re.search(pattern, around):
            return sec
    return ""


def rewrite_issues(path: str, text: str, unresolved: list[str]) -> str:
    """Every issue citation of ``text`` in the new form (those without a known issue are kept and
    named in ``unresolved``)."""
    seen: list[tuple[int, int]] = []
    for m in ISSUE_RE.finditer(text):
        if m.group("num") and int(m.group("n")) in ISSUES:
            seen.append((m.start(), int(m.group("n"))))
        elif m.group("nick"):
            seen.append((m.start(), NICKNAMES[m.group("nn")][0]))

    def repl(m: re.Match[str]) -> str:
        whole = m.group(0)
        if not whole.strip():
            return whole
        default = ""
        if m.group("num"):
            issue_no = int(m.group("n"))
            if issue_no not in ISSUES:
                unresolved.append(f"{path}:{text.count(chr(10), 0, m.start()) + 1}: {whole!r}")
                return whole
        elif m.group("nick"):
            issue_no, default = NICKNAMES[m.group("nn")]
            if not m.group("secs") and not m.group("ms"):
                default = _refined(m.group("nn"), text, m.start(), m.end()) or default
        else:
            ctx = _file_context(path) if m.group("bare") else None
            ctx = ctx if ctx is not None else _context_at(path, text, m.start(), seen)
            if ctx is None:
                unresolved.append(f"{path}:{text.count(chr(10), 0, m.start()) + 1}: {whole!r}")
                return whole
            issue_no = ctx
        issue = ISSUES[issue_no]
        secs = m.group("secs") or ""
        ms = m.group("ms") or ""
        if (m.group("bare") or m.group("barems") is not None) and not secs and not ms:
            return whole
        # keep one line break of the original citation, where the section numbers start
        brk = re.search(r"\n[ \t]*(?:#[ \t]*)?", whole)
        parts: list[str] = []
        if secs:
            parts.append(_map_secs(secs.strip(" \t\n#"), issue.sec))
        if ms:
            ms_clean = re.sub(r"^[\s,;#]*", "", ms)
            parts.append(_map_ms(ms_clean, issue.ms))
        if not parts:
            bare = default or issue.bare
            parts = [f"§{bare}"] if bare else []
        tail = ", ".join(parts)
        if brk and tail:
            # the break sits where the old one was, before the sections when the head and the
            # sections were split over two lines, else at the end of the head
            return f"{issue.doc}{brk.group(0)}{tail}"
        if brk:
            return f"{issue.doc}{brk.group(0)}".rstrip(" \t")
        return f"{issue.doc} {tail}" if tail else issue.doc

    out = ISSUE_RE.sub(repl, text)
    out = ISSUE_POSSESSIVE_RE.sub(
        lambda m: f"{ISSUES[int(m.group(1))].doc}'s" if int(m.group(1)) in ISSUES else m.group(0), out)
    return out


def rewrite_specs(text: str) -> str:
    """``10-tools §3.3`` → ``docs/tools.md §3.3``; ``../shared/spec/00-design.md`` →
    ``docs/architecture.md``; ``50-prefect-lab P3`` → ``docs/prefect-facts.md P3``."""
    return SPEC_RE.sub(lambda m: SPEC_DOCS[m.group(1)], text)


def rewrite_text(path: str, text: str, unresolved: list[str]) -> str:
    for pattern, replacement in PHRASES:
        text = re.sub(pattern, replacement, text)
    text = rewrite_issues(path, text, unresolved)
    text = rewrite_specs(text)
    return text


# --- keeping prose lines short -------------------------------------------------------------------


def _prose_lines(path: str, text: str) -> set[int]:
    """0-based numbers of the lines that are prose: comment lines and lines inside multi-line
    strings of a Python file; every line of a Markdown file except fenced code and tables; comment
    lines of a shell file. Other files: none."""
    lines = text.split("\n")
    if path.endswith(".py"):
        out: set[int] = set()
        try:
            for tok in tokenize.generate_tokens(io.StringIO(text).readline):
                if tok.type == tokenize.COMMENT and lines[tok.start[0] - 1].lstrip().startswith("#"):
                    out.add(tok.start[0] - 1)
                elif tok.type == tokenize.STRING and tok.start[0] != tok.end[0]:
                    out.update(range(tok.start[0] - 1, tok.end[0]))
        except (tokenize.TokenError, SyntaxError):
            return set()
        return out
    if path.endswith(".md"):
        out, fenced = set(), False
        for i, line in enumerate(lines):
            if line.lstrip().startswith("```"):
                fenced = not fenced
                continue
            if not fenced and not line.lstrip().startswith("|"):
                out.add(i)
        return out
    if path.endswith(".sh"):
        return {i for i, line in enumerate(lines) if line.lstrip().startswith("#")}
    return set()


_ITEM_START = re.compile(r"^(?:[-*+] |\d+\. |#+ |[A-Z][A-Za-z ]+:$|\.\. |>>> |```|\"\"\"|''')")
"""A line that starts something new (a list item, a heading, a section of a docstring)."""


def _prefix(line: str) -> str:
    """The indentation and comment marker a continuation of ``line`` starts with."""
    m = re.match(r"^([ \t]*(?:(?:#+|//)[ \t]?)?)", line)
    prefix = m.group(1) if m else ""
    item = re.match(r"(?:[-*+] |\d+\. )", line[len(prefix):])
    return prefix + (" " * len(item.group(0)) if item else "")


def reflow(path: str, before: str, after: str) -> str:
    """Re-wrap the prose lines the rewrite made longer than :data:`LINE_LIMIT`: the words past the
    limit move to the start of the next line of the same paragraph (same prefix, not a new item),
    cascading; where the paragraph ends there, they get a line of their own."""
    old = set(before.split("\n"))
    lines = after.split("\n")
    prose = _prose_lines(path, after)
    i = 0
    while i < len(lines):
        line = lines[i]
        deco = re.match(r"^([ \t]*#[ \t]*-{3}[ \t].*?[ \t])(-{3,})$", line)
        one_line_doc = (re.match(r'^([ \t]*)("""|\'\'\')(?!.*\2.*\2).*\2[ \t]*$', line)
                        if path.endswith(".py") else None)
        if deco and len(line) > DECORATED_WIDTH and line not in old:
            # a "# --- title ---…" rule line keeps its width: the dashes give way
            lines[i] = deco.group(1) + "-" * max(3, DECORATED_WIDTH - len(deco.group(1)))
        elif one_line_doc and len(line) > LINE_LIMIT and line not in old:
            # a one-line docstring the rewrite made too long becomes a two-line one
            indent = one_line_doc.group(1)
            cut = None
            for w in re.finditer(r" +", line):
                if len(indent) + 13 < w.start() <= LINE_LIMIT:
                    cut = w
            if cut is not None:
                lines[i: i + 1] = [line[: cut.start()], indent + line[cut.end():]]
                prose = {p + 1 if p > i else p for p in prose} | {i, i + 1}
        elif i in prose and len(line) > LINE_LIMIT and line not in old:
            cont = _prefix(line)
            cut = None
            for w in re.finditer(r" +", line):
                if len(cont) + 10 < w.start() <= LINE_LIMIT:
                    cut = w
            if cut is not None:
                head, rest = line[: cut.start()], line[cut.end():]
                nxt = lines[i + 1] if i + 1 < len(lines) else None
                joinable = (
                    nxt is not None and (i + 1) in prose and nxt.strip() != ""
                    and nxt.startswith(cont) and not nxt[len(cont):len(cont) + 1].isspace()
                    and (not cont.strip() or _prefix(nxt) == cont)
                    and not _ITEM_START.match(nxt[len(cont):])
                    and '"""' not in rest and "'''" not in rest
                )
                lines[i] = head
                if joinable:
                    lines[i + 1] = cont + rest + " " + nxt[len(cont):]
                    old.discard(lines[i + 1])
                else:
                    lines.insert(i + 1, cont + rest)
                    prose = {p + 1 if p > i else p for p in prose} | {i + 1}
        i += 1
    return "\n".join(lines)


# --- files ---------------------------------------------------------------------------------------


def tracked_files(root: Path = ROOT) -> list[str]:
    """The tracked text files this rewrite (and tests/test_citations.py) scans."""
    out = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True, check=True).stdout
    files = []
    for name in out.decode("utf-8", "surrogateescape").split("\0"):
        if not name or any(fnmatch.fnmatch(name, p) for p in SKIPPED):
            continue
        if any(fnmatch.fnmatch(name, p) for p in SCANNED) and (root / name).is_file():
            files.append(name)
    return files


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="only list what would change; exit 1 if anything would")
    ap.add_argument("--root", type=Path, default=ROOT, help="the clone to rewrite (default: this one)")
    args = ap.parse_args(argv)
    root = args.root.resolve()
    changed_files, changes, unresolved = 0, 0, []
    for name in tracked_files(root):
        if name in SELF:
            continue
        p = root / name
        try:
            before = p.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        after = rewrite_text(name, before, unresolved)
        if after == before:
            continue
        after = reflow(name, before, after)
        if name.endswith(".py"):
            try:
                compile(after, name, "exec")
            except SyntaxError as exc:
                print(f"{name}: the rewrite would not parse ({exc}); left unchanged", file=sys.stderr)
                continue
        changed_files += 1
        old_lines, new_lines = before.split("\n"), after.split("\n")
        for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=old_lines, b=new_lines, autojunk=False).get_opcodes():
            if tag == "equal":
                continue
            changes += 1
            for k in range(i1, i2):
                print(f"{name}:{k + 1}: - {old_lines[k].strip()}")
            for k in range(j1, j2):
                print(f"{name}:{k + 1}: + {new_lines[k].strip()}")
        if not args.check:
            p.write_text(after, encoding="utf-8")
    if changed_files and not args.check:
        for name, code in GENERATED:
            if (root / name).is_file():
                done = subprocess.run([sys.executable, "-c", code, str(root)], cwd=root, capture_output=True,
                                      text=True)
                if done.returncode != 0:
                    print(f"{name}: not regenerated ({done.stderr.strip().splitlines()[-1:]}); regenerate it "
                          f"with the clone's own interpreter (the rewrite of its docstrings changed it)",
                          file=sys.stderr)
    for u in unresolved:
        print(f"unresolved (kept): {u}", file=sys.stderr)
    verb = "would change" if args.check else "changed"
    print(f"{verb} {changes} place(s) in {changed_files} file(s); {len(unresolved)} unresolved", file=sys.stderr)
    return 1 if args.check and changed_files else 0


if __name__ == "__main__":
    sys.exit(main())
