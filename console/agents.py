"""``tianshu-mcp agents doctor [--home DIR] [--json]``: what each agent profile will meet (docs/real-agents.md
§5).

For every profile (the built-ins and ``<home>/agent-profiles.json``; ``--home`` or
``$TIANSHU_MCP_HOME`` or ``~/.tianshu-mcp``): the executable or why there is none, its version
against ``testedVersions``, its command line's flags against its ``--help``, the Node.js that
runs it against ``nodeVersions``, the credentials it will use. The facts come from
:mod:`tianshu_mcp.adapters.doctor` (the same as ``query_info(type="profiles")``); this module
only parses the arguments and prints them: a text report by default, with ``--json`` a JSON list
of per-profile objects (:meth:`~tianshu_mcp.adapters.doctor.AgentDiagnosis.to_json`).

Exit codes: 0 when no profile has a problem (a CLI that is not installed is none), 1 when one
has (a flag its help lacks, a version older than tested, an unsuitable Node.js, no credentials,
a broken profile entry), 2 for bad arguments or an unreadable ``agent-profiles.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from ..adapters.doctor import AgentDiagnosis, diagnose_home, exit_code
from ..core.errors import TianshuError

USAGE = """usage: tianshu-mcp agents doctor [--home DIR] [--json]

For every agent profile (built-in and <home>/agent-profiles.json): the executable found (or why
not), its version against the profile's testedVersions, each flag of its command line present in
its --help, the Node.js that runs it against nodeVersions, and the credentials it will use (a
variable's name, never its value). A custom command is never started unless its profile sets
versionArgs / helpArgs; a desktop app never. Exit 0 when no found profile has a problem (a CLI
that is not installed is none), 1 otherwise, 2 for bad arguments or an unreadable profile file.

  --home DIR   data home holding agent-profiles.json (default $TIANSHU_MCP_HOME or ~/.tianshu-mcp)
  --json       a JSON list of per-profile objects instead of the text report"""

_NOTE_WIDTH = 110
"""Longest "not runnable" reason printed in the text report, characters."""


def _version_line(d: AgentDiagnosis) -> str:
    if d.version_status == "not probed":
        return next((n for n in d.notes if n.startswith("not probed")), "not probed")
    text = d.version or "unknown"
    if d.tested_versions:
        return f"{text} ({d.version_status}: testedVersions {d.tested_versions})"
    return f"{text} (no testedVersions)"


def _flags_line(d: AgentDiagnosis) -> str:
    f = d.flags
    if not f.checked:
        return f.note or "not checked"
    parts = (["present " + " ".join(f.present)] if f.present else []) + (["MISSING " + " ".join(f.missing)] if f.missing else [])
    return f"{f.help_command}: " + "; ".join(parts)


def _node_line(d: AgentDiagnosis) -> str | None:
    n = d.node
    if n is None:
        return None
    if n.status == "not applicable":
        return f"not applicable ({n.detail}); nodeVersions {n.required}"
    if n.status == "not found":
        return f"NOT FOUND ({n.detail}); nodeVersions {n.required}"
    version = f"v{n.version}" if n.version else "version unknown"
    return f"{version} {n.executable} ({n.detail}): {n.status} for {n.required}"


def _auth_line(d: AgentDiagnosis) -> str:
    a = d.auth
    if a is None:
        return "no authSources in the profile"
    if a.kind == "none":
        return "none found"
    return f"{a.kind} {a.source}" + (f" ({a.note})" if a.note else "")


def render_text(results: list[AgentDiagnosis], home: Path) -> str:
    """The human report: a block per found profile (command, version, flags, node, auth, notes,
    problems), one line per profile that is not installed, not runnable or broken, a summary."""
    lines = [f"agents doctor: home {home}", ""]
    found = [d for d in results if d.state in ("ok", "problem")]
    for d in found:
        lines.append(f"{d.id}  [{'OK' if d.state == 'ok' else 'PROBLEM'}]  {d.display_name} ({d.driver})")
        how = {"path": "found on PATH", "discovery": "found by discovery", "explicit": "as configured"}.get(d.source or "", "")
        lines.append(f"    command  {d.command}" + (f" ({how})" if how else ""))
        if d.driver == "gui":
            lines.extend(f"    note     {n}" for n in d.notes)
            lines.append("")
            continue
        lines.append(f"    version  {_version_line(d)}")
        lines.append(f"    flags    {_flags_line(d)}")
        node = _node_line(d)
        if node:
            lines.append(f"    node     {node}")
        lines.append(f"    auth     {_auth_line(d)}")
        lines.extend(f"    note     {n}" for n in d.notes if not n.startswith("not probed"))
        lines.extend(f"    PROBLEM  {p}" for p in d.problems)
        lines.append("")
    for state in ("broken", "not installed", "not runnable"):
        rows = [d for d in results if d.state == state]
        if not rows:
            continue
        lines.append(f"{state}:")
        for d in rows:
            why = d.problems[0] if d.problems else d.message
            if state != "broken" and len(why) > _NOTE_WIDTH:  # a broken entry's reason is shown whole
                why = why[:_NOTE_WIDTH - 1] + "…"
            lines.append(f"    {d.id}  {why}")
        lines.append("")
    counts = {s: sum(1 for d in results if d.state == s) for s in ("ok", "problem", "not installed", "not runnable", "broken")}
    lines.append(f"summary: {len(found)} found ({counts['ok']} ok, {counts['problem']} with problems), "
                 f"{counts['not installed']} not installed, {counts['not runnable']} not runnable, "
                 f"{counts['broken']} broken profile entr{'y' if counts['broken'] == 1 else 'ies'}")
    return "\n".join(lines)


class _Parser(argparse.ArgumentParser):
    """argparse that raises instead of exiting (the message goes to stderr, exit 2)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise ValueError(message)


def doctor(argv: list[str]) -> int:
    """``agents doctor [--home DIR] [--json]``; returns the exit code (see the module doc)."""
    parser = _Parser(prog="tianshu-mcp agents doctor", add_help=False)
    parser.add_argument("--home")
    parser.add_argument("--json", action="store_true")
    try:
        args = parser.parse_args(argv)
    except ValueError as exc:
        print(f"tianshu-mcp agents doctor: {exc} (see --help)", file=sys.stderr)
        return 2
    try:
        if args.home:
            home = Path(args.home).expanduser().resolve()
        else:
            from ..core.settings import data_home

            home = data_home(create=False)  # reads only
        results = diagnose_home(home)
    except TianshuError as exc:
        print(f"Error: [{exc.code.value}] {exc.message}", file=sys.stderr)
        return 2
    try:
        if args.json:
            print(json.dumps([d.to_json() for d in results], indent=2, ensure_ascii=False), flush=True)
        else:
            print(render_text(results, home), flush=True)
    except BrokenPipeError:  # `| head` closed the pipe: not an error of ours
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - silence the flush at exit
    return exit_code(results)


def main(argv: list[str]) -> int:
    """``tianshu-mcp agents …``: ``doctor`` (the only subcommand) or ``--help``."""
    if not argv or argv[0] in ("--help", "-h", "help") or (argv[0] == "doctor" and ("--help" in argv or "-h" in argv)):
        print(USAGE)
        return 0
    if argv[0] == "doctor":
        return doctor(argv[1:])
    print(f"tianshu-mcp agents: unknown subcommand {argv[0]!r} (see tianshu-mcp agents --help)", file=sys.stderr)
    return 2
