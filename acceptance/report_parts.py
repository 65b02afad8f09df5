"""The parts of a round's report that say what the agent was told and what it changed, and which
program each check ran (docs/acceptance.md §8.8, design note "What a report shows of a round"):

* ``brief``: the prompt the agent got in the round (``prompt-<N>.txt``), its start capped at
  :data:`BRIEF_MAX_CHARS` characters (:func:`brief_section`);
* ``diff``: the change as a patch against the baseline, its start capped at :data:`DIFF_MAX_LINES`
  lines / :data:`DIFF_MAX_BYTES` bytes, the whole patch in ``report-<N>.patch`` (:func:`diff_section`);
* a check's ``resolved`` program (path, ``#!`` interpreter, version), shown beside its configured
  command (:func:`resolved_text`);
* output tails shown from a line start (:func:`shown_tail`).

The markdown (``md_*``) and HTML (``html_*``) renderings of these parts live here too; every value
taken from the report is HTML-escaped. Plain Python; only :func:`brief_section` reads a file.
"""

from __future__ import annotations

import html
import os
from pathlib import Path
from typing import Any, Mapping

from ..core.i18n import _
from ..core.text import line_head, line_tail

__all__ = [
    "AGENT_TAIL_CAP",
    "BRIEF_MAX_CHARS",
    "DIFF_MAX_LINES",
    "DIFF_MAX_BYTES",
    "brief_section",
    "diff_section",
    "patch_path",
    "resolved_text",
    "shown_tail",
    "md_agent",
    "md_brief",
    "md_diff",
    "html_agent",
    "html_brief",
    "html_diff",
    "html_resolved",
]

AGENT_TAIL_CAP = 2000
"""An agent's ``outputTail`` holds at most this many characters (``tasks.dispatch.AGENT_TAIL_CHARS``)."""
BRIEF_MAX_CHARS = 12_000
"""The report shows at most this many characters of the brief (its start; the file has it all)."""
DIFF_MAX_LINES = 200
DIFF_MAX_BYTES = 64 * 1024
"""The report shows at most this many lines / bytes of the patch (its start; ``report-<N>.patch``
has it all)."""


def patch_path(task_dir: str | os.PathLike[str], round_: int) -> Path:
    """``<task_dir>/report-<N>.patch``."""
    return Path(task_dir) / f"report-{round_}.patch"


def brief_section(brief_file: str | os.PathLike[str] | None) -> dict[str, Any] | None:
    """``report["brief"]``: ``{file, chars, text, truncated}`` of the prompt file (``text``: its
    first :data:`BRIEF_MAX_CHARS` characters, cut at a line end), or None when there is no such
    file or it cannot be read."""
    if brief_file is None:
        return None
    try:
        full = Path(brief_file).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    text, cut = line_head(full, BRIEF_MAX_CHARS)
    return {"file": str(Path(brief_file).absolute()), "chars": len(full), "text": text, "truncated": cut}


def diff_section(patch: str, file: str | os.PathLike[str]) -> dict[str, Any]:
    """``report["diff"]``: ``{file, lines, bytes, text, shownLines, truncated}`` of a non-empty patch
    written to ``file`` (``text``: its first :data:`DIFF_MAX_LINES` lines within
    :data:`DIFF_MAX_BYTES` bytes, whole lines)."""
    lines = patch.splitlines(keepends=True)
    shown: list[str] = []
    size = 0
    for ln in lines[:DIFF_MAX_LINES]:
        n = len(ln.encode("utf-8"))
        if shown and size + n > DIFF_MAX_BYTES:
            break
        shown.append(ln if n <= DIFF_MAX_BYTES else ln[:DIFF_MAX_BYTES // 4] + "…\n")
        size += n
    return {"file": str(Path(file).absolute()), "lines": len(lines), "bytes": len(patch.encode("utf-8")),
            "text": "".join(shown), "shownLines": len(shown), "truncated": len(shown) < len(lines)}


def resolved_text(c: Mapping[str, Any]) -> str:
    """``/p/.venv/bin/pytest (pytest 8.3.4; #! /p/.venv/bin/python)`` of a check's ``resolved``, or ``""``."""
    r = c.get("resolved")
    if not isinstance(r, Mapping) or not r.get("path"):
        return ""
    extra = [str(x) for x in (r.get("version"), f"#! {r['interpreter']}" if r.get("interpreter") else None) if x]
    return str(r["path"]) + (f" ({'; '.join(extra)})" if extra else "")


def shown_tail(text: str, cap: int) -> str:
    """An output tail as shown: one that filled its cap (``cap`` characters: it was cut) starts at its
    first whole line, after a ``[…]`` line, never mid-word."""
    text = text or ""
    return line_tail(text, len(text) - 1) if len(text) >= cap > 1 else text


def _fence(text: str) -> str:
    longest = 0
    run = 0
    for ch in text:
        run = run + 1 if ch == "`" else 0
        longest = max(longest, run)
    return "`" * max(3, longest + 1)


def md_agent(agent: Mapping[str, Any], tail_cap: int) -> list[str]:
    """``## Agent``: exit code and duration, its meaning, a recognised failure line, tokens and
    cost, tool calls, the final message and the output's last lines (``tail_cap``: the tail's stored
    cap, :func:`shown_tail`)."""
    code = agent.get("exitCode")
    lines = ["## " + _("Agent"), "", "- " + _("Exit code: {code}").format(code=code if code is not None else _("none (stopped)"))
             + (_(" after {ms} ms").format(ms=agent.get("durationMs")) if agent.get("durationMs") is not None else "")]
    if agent.get("exitMeaning"):
        lines.append("- " + _("Exit code meaning: {meaning}").format(meaning=agent["exitMeaning"]))
    if agent.get("fatalLine"):
        lines.append("- " + _("Recognised failure line: `{line}`").format(line=agent["fatalLine"]))
    usage = agent.get("usage")
    if isinstance(usage, Mapping):
        cost = usage.get("costUsd")
        lines.append("- " + _("Tokens: {input} in, {output} out").format(input=usage.get("inputTokens"),
                                                                      output=usage.get("outputTokens"))
                     + (_(", cost ${cost}").format(cost=f"{cost:.4f}") if isinstance(cost, (int, float)) else ""))
    if agent.get("toolCalls"):
        lines.append("- " + _("Tool calls: {n}").format(n=agent["toolCalls"]))
    if agent.get("finalMessage"):
        lines += ["", _("Final message:"), "", "> " + str(agent["finalMessage"]).strip().replace("\n", "\n> ")]
    tail = shown_tail(str(agent.get("outputTail") or ""), tail_cap).rstrip() or _("(no output)")
    return [*lines, "", _("Output (last lines):"), "", _fence(tail), tail, _fence(tail), ""]


def md_brief(report: Mapping[str, Any]) -> list[str]:
    """``## Brief``: the prompt file, its size and its (capped) text, or nothing."""
    b = report.get("brief")
    if not isinstance(b, Mapping):
        return []
    text = str(b.get("text") or "").rstrip("\n")
    f = _fence(text)
    lines = ["## " + _("Brief"), "", "- " + _("What the agent was told in this round: `{file}` ({chars} characters)").format(
        file=b.get("file"), chars=b.get("chars")), "", f, text, f]
    if b.get("truncated"):
        lines.append(_("(cut: the first {shown} of {chars} characters are shown; the file holds the whole brief)").format(
            shown=len(str(b.get("text") or "")), chars=b.get("chars")))
    return [*lines, ""]


def md_diff(report: Mapping[str, Any]) -> list[str]:
    """``### Diff``: the patch file, its size and its (capped) start, or nothing."""
    d = report.get("diff")
    if not isinstance(d, Mapping):
        return []
    text = str(d.get("text") or "").rstrip("\n")
    f = _fence(text)
    lines = ["", "### " + _("Diff"), "", "- " + _("Full patch: `{file}` ({lines} lines, {bytes} bytes)").format(
        file=d.get("file"), lines=d.get("lines"), bytes=d.get("bytes")), "", f + "diff", text, f]
    if d.get("truncated"):
        lines.append(_("(cut: the first {shown} of {lines} lines are shown; the patch file holds the whole change)").format(
            shown=d.get("shownLines"), lines=d.get("lines")))
    return lines


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def html_resolved(c: Mapping[str, Any]) -> str:
    """The ``ran …`` line under a check's command in the HTML report, or ``""``."""
    text = resolved_text(c)
    return f'<div class="muted">{_e(_("ran: {program}").format(program=text))}</div>' if text else ""


def html_agent(report: Mapping[str, Any], tail_cap: int) -> str:
    """``<section id="agent">``: exit code, duration, its meaning, the recognised failure line, tokens,
    tool calls, the final message and the output tail (``tail_cap``: the tail's stored cap), or ``""``."""
    agent = report.get("agent")
    if not isinstance(agent, Mapping):
        return ""
    code = agent.get("exitCode")
    rows = [(_("Exit code"), code if code is not None else _("none (stopped)"))]
    if agent.get("durationMs") is not None:
        rows.append((_("Duration"), f"{agent['durationMs']} ms"))
    if agent.get("exitMeaning"):
        rows.append((_("Exit code meaning"), agent["exitMeaning"]))
    if agent.get("fatalLine"):
        rows.append((_("Recognised failure line"), agent["fatalLine"]))
    usage = agent.get("usage")
    if isinstance(usage, Mapping):
        rows.append((_("Tokens"), _("{input} in, {output} out").format(input=usage.get("inputTokens"),
                                                                        output=usage.get("outputTokens"))))
    if agent.get("toolCalls"):
        rows.append((_("Tool calls"), agent["toolCalls"]))
    body = "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in rows)
    out = ['<section id="agent"><h2>' + _e(_("Agent")) + "</h2>",
           f'<div class="scroll"><table class="meta"><tbody>{body}</tbody></table></div>']
    if agent.get("finalMessage"):
        out.append(f"<h3>{_e(_('Final message'))}</h3><blockquote>{_e(str(agent['finalMessage']).strip())}</blockquote>")
    tail = shown_tail(str(agent.get("outputTail") or ""), tail_cap).rstrip() or _("(no output)")
    out.append(f"<details open><summary>{_e(_('Output (last lines)'))}</summary><pre>{_e(tail)}</pre></details>")
    out.append("</section>")
    return "".join(out)


def html_brief(report: Mapping[str, Any]) -> str:
    """``<section id="brief">``: the prompt file and its (capped) text, collapsed; or ``""``."""
    b = report.get("brief")
    if not isinstance(b, Mapping):
        return ""
    where = _e(_("What the agent was told in this round: {file} ({chars} characters)")).format(
        file=f"<code>{_e(b.get('file'))}</code>", chars=_e(b.get("chars")))
    note = ""
    if b.get("truncated"):
        note = '<p class="muted">' + _e(_("(cut: the first {shown} of {chars} characters are shown; the file holds the "
                                         "whole brief)").format(shown=len(str(b.get("text") or "")),
                                                                chars=b.get("chars"))) + "</p>"
    return (f'<section id="brief"><h2>{_e(_("Brief"))}</h2><p>{where}</p>'
            f"<details><summary>{_e(_('Brief text'))}</summary><pre>{_e(b.get('text'))}</pre></details>{note}</section>")


def html_diff(report: Mapping[str, Any]) -> str:
    """The ``Diff`` part of the code analysis: the patch file and its (capped) start; or ``""``."""
    d = report.get("diff")
    if not isinstance(d, Mapping):
        return ""
    where = _e(_("Full patch: {file} ({lines} lines, {bytes} bytes)")).format(
        # a relative link: the patch lies beside the page (report-<N>.patch next to report-<N>.html)
        file=f'<a href="{_e(os.path.basename(str(d.get("file") or "")))}"><code>{_e(d.get("file"))}</code></a>',
        lines=_e(d.get("lines")), bytes=_e(d.get("bytes")))
    rows = []
    for ln in str(d.get("text") or "").splitlines():
        cls = ("add" if ln.startswith("+") and not ln.startswith("+++") else
               "del" if ln.startswith("-") and not ln.startswith("---") else
               "hunk" if ln.startswith("@@") else "head" if ln.startswith(("diff --git", "index ", "---", "+++")) else "")
        rows.append(f'<span class="{cls}">{_e(ln)}</span>' if cls else _e(ln))
    note = ""
    if d.get("truncated"):
        note = '<p class="muted">' + _e(_("(cut: the first {shown} of {lines} lines are shown; the patch file holds the "
                                         "whole change)").format(shown=d.get("shownLines"), lines=d.get("lines"))) + "</p>"
    return (f'<h3 id="diff">{_e(_("Diff"))}</h3><p>{where}</p>'
            f'<details open><summary>{_e(_("Patch"))}</summary><pre class="diff">{chr(10).join(rows)}</pre></details>{note}')
