"""The machine checks of ``agents doctor`` (docs/real-agents.md §5) that do not start the agent itself: a
version against ``testedVersions``, the Node.js that runs a CLI against ``nodeVersions``, and
the credentials it will find (``authSources``). :mod:`.doctor` puts them together per profile.
Plain Python: no Prefect, no acceptance import.
"""

from __future__ import annotations

import os
import re
import shutil
from typing import Literal

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version
from pydantic import BaseModel

from . import versions
from .profiles import AgentProfile

VersionStatus = Literal["tested", "newer than tested", "older than tested", "unknown", "not probed"]
"""How a version compares with ``testedVersions`` (``not probed``: a custom command, not asked)."""

_NODE_NAMES = ("node", "nodejs", "node.exe")
_SHELLS = ("sh", "bash", "dash", "zsh", "ksh")
_SHIM_RUNS_NODE = re.compile(r"""(^|[\s"'/])node(\.exe)?["']?(\s|$)""", re.MULTILINE)
_NATIVE_MAGIC = (b"\x7fELF", b"\xcf\xfa\xed\xfe", b"\xce\xfa\xed\xfe", b"\xca\xfe\xba\xbe", b"\xfe\xed\xfa\xcf", b"MZ")


class NodeReport(BaseModel):
    """Which Node.js runs the CLI, against ``nodeVersions``.

    Attributes:
        required: the profile's ``nodeVersions`` specifier (e.g. ``>=22``).
        executable: path of that ``node``, or None (not found / not applicable).
        version: what it reports (``22.4.0``), or None.
        status: ``ok``, ``unsatisfied`` (outside ``required``), ``not found`` (a Node script
            and no ``node``), ``not applicable`` (a native binary or another interpreter),
            ``unknown`` (no version, or an invalid specifier).
        detail: how it was found (``#!/usr/bin/env node: the node on PATH``, ``native binary`` …).
    """

    required: str
    executable: str | None = None
    version: str | None = None
    status: Literal["ok", "unsatisfied", "not found", "not applicable", "unknown"]
    detail: str = ""


class AuthReport(BaseModel):
    """The credentials the CLI will find first (the first matching ``authSources`` entry).

    Attributes:
        source: the environment variable's *name* (never its value), the file's path (``~``
            expanded), or None when none was found.
        kind: ``env``, ``file`` or ``none``.
        note: the entry's note (``API key`` …), or ``none found``.
    """

    source: str | None
    kind: Literal["env", "file", "none"]
    note: str = ""


def compare_version(version: str | None, tested: str | None) -> tuple[VersionStatus, str | None]:
    """``version`` against the PEP 440 specifier ``tested`` (pre-releases count).

    Returns:
        ``(status, problem)``: status ``tested`` / ``newer than tested`` / ``older than tested``
        / ``unknown`` (no version, no range, or a version PEP 440 cannot read); problem: a
        message when ``tested`` is not a valid specifier, else None.
    """
    if tested is None:
        return "unknown", None
    try:
        spec = SpecifierSet(tested)
    except InvalidSpecifier:
        return "unknown", f"testedVersions {tested!r} is not a PEP 440 version specifier (e.g. '>=0.171,<0.200')"
    if version is None:
        return "unknown", None
    try:
        have = Version(version)
    except InvalidVersion:
        return "unknown", None
    if spec.contains(have, prereleases=True):
        return "tested", None
    for one in spec:
        if one.contains(have, prereleases=True):
            continue
        if one.operator in ("<", "<="):
            return "newer than tested", None
        if one.operator in (">", ">="):
            return "older than tested", None
        try:
            bound = Version(one.version.removesuffix(".*"))
        except InvalidVersion:
            return "unknown", None
        return ("newer than tested" if have > bound else "older than tested"), None
    return "unknown", None


def agent_environment(profile: AgentProfile) -> dict[str, str]:
    """The environment the agent will see: this process's, then the profile's ``env`` (and its
    ``rootEnv`` when running as root) on top."""
    env = {**os.environ, **profile.env}
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        env.update(profile.root_env)
    return env


def node_runtime(executable: str, path: str) -> tuple[Literal["node", "native", "other"], str | None, str]:
    """How ``executable`` is run, and by which ``node`` when by Node.js.

    ``#!/usr/bin/env node`` (also ``env -S node …``): the first ``node`` on ``path``;
    ``#!/abs/node``: that file; a shell script that runs ``node`` (npm's shim): the ``node``
    next to it, else on ``path``; an ELF/Mach-O/PE file: native. Symlinks are followed to read
    the file (npm links ``bin/codex`` to ``…/codex.js``).

    Args:
        executable: the resolved command.
        path: the PATH the agent will see (``os.pathsep``-separated).

    Returns:
        ``(kind, node, detail)``: kind ``node`` (node: the path or None when not found),
        ``native`` or ``other`` (node None); detail says how, for the report. Never raises.
    """
    try:
        with open(os.path.realpath(executable), "rb") as fh:
            head = fh.read(8192)
    except OSError as exc:
        return "other", None, f"cannot read the executable ({exc.strerror or exc})"
    if head.startswith(_NATIVE_MAGIC):
        return "native", None, "native binary"
    if not head.startswith(b"#!"):
        return "other", None, "neither a #! script nor a native binary"
    words = head[2:].split(b"\n", 1)[0].decode("utf-8", "replace").split()
    if not words:
        return "other", None, "an empty #! line"
    interpreter, rest = words[0], words[1:]
    name = os.path.basename(interpreter)
    if name == "env":
        program = next((w for w in rest if not w.startswith("-") and "=" not in w), "")
        if os.path.basename(program) not in _NODE_NAMES:
            return "other", None, f"runs with {program or 'env'}"
        return "node", shutil.which(program, path=path), f"#!{interpreter} {program}: the {program} on PATH"
    if name in _NODE_NAMES:
        return "node", interpreter if os.access(interpreter, os.X_OK) else None, f"#!{interpreter}"
    if name in _SHELLS and _SHIM_RUNS_NODE.search(head.decode("utf-8", "replace")):
        beside = os.path.join(os.path.dirname(executable), "node")
        if os.path.isfile(beside) and os.access(beside, os.X_OK):
            return "node", beside, "a shell shim: the node next to it"
        return "node", shutil.which("node", path=path), "a shell shim: the node on PATH"
    return "other", None, f"runs with {interpreter}"


def check_node(executable: str, profile: AgentProfile) -> tuple[NodeReport | None, str | None]:
    """The Node.js check of a found executable (:func:`node_runtime`, then ``node --version``).

    Returns:
        ``(report, problem)``: report None when the profile sets no ``nodeVersions``; problem a
        message when the CLI needs Node and none is found or its version is outside the range.
    """
    required = profile.node_versions
    if required is None:
        return None, None
    path = agent_environment(profile).get("PATH", os.defpath)
    kind, node, detail = node_runtime(executable, path)
    if kind != "node":
        return NodeReport(required=required, status="not applicable", detail=detail), None
    if node is None:
        beside = os.path.join(os.path.dirname(executable), "node")
        hint = (f"; one is next to the CLI ({beside}): add {os.path.dirname(executable)} to PATH"
                if os.path.isfile(beside) else "")
        return (NodeReport(required=required, status="not found", detail=detail),
                f"{os.path.basename(executable)} runs on Node.js ({required}) but no node is on PATH{hint}")
    probe = versions.run_probe(node, ["--version"], versions.VERSION_TIMEOUT_S)
    version = versions.parse_version(probe.output[:4096]) if probe and not probe.timed_out else None
    report = NodeReport(required=required, executable=node, version=version, status="unknown", detail=detail)
    try:
        spec = SpecifierSet(required)
        have = Version(version) if version else None
    except InvalidSpecifier:
        return report, f"nodeVersions {required!r} is not a PEP 440 version specifier (e.g. '>=22')"
    except InvalidVersion:
        return report, None
    if have is None:
        return report, None
    if spec.contains(have, prereleases=True):
        return report.model_copy(update={"status": "ok"}), None
    return (report.model_copy(update={"status": "unsatisfied"}),
            f"node v{version} ({node}) does not satisfy nodeVersions {required}: put a suitable node first on PATH")


def check_auth(profile: AgentProfile) -> tuple[AuthReport | None, str | None, str | None]:
    """The first ``authSources`` entry the agent will find: a variable set (non-empty) in
    :func:`agent_environment`, or a file (``~`` expanded) that exists. A relative file (aider's
    ``.env``) is the project's: it cannot be checked without one and is skipped.

    Returns:
        ``(report, problem, note)``: report None when the profile declares no ``authSources``;
        when none is found, a note naming the places looked at (never a value); never a
        problem, since a CLI may keep credentials where no profile can list them.
    """
    if not profile.auth_sources:
        return None, None, None
    env = agent_environment(profile)
    in_project = []
    for src in profile.auth_sources:
        if src.env is not None and env.get(src.env):
            return AuthReport(source=src.env, kind="env", note=src.note), None, None
        if src.file is not None:
            path = os.path.expanduser(src.file)
            if not os.path.isabs(path):
                in_project.append(src.file)
            elif os.path.exists(path):
                return AuthReport(source=path, kind="file", note=src.note), None, None
    places = ", ".join(f"env {s.env}" if s.env is not None else f"file {s.file}" for s in profile.auth_sources
                       if s.file not in in_project)
    none = AuthReport(source=None, kind="none", note="none found")
    if in_project:
        return none, None, (f"no credentials found (looked for {places}); the project's {', '.join(in_project)} "
                            "may still hold them")
    # a note, not a problem: a CLI may hold credentials where no profile can list them (a custom
    # provider's own key variable, a gateway token in its config)
    return none, None, (f"no credentials found in the usual places ({places}); unless the CLI's own configuration "
                        "names another, it cannot reach its model")
