"""``tianshu-mcp holdout …``: a project's holdout checks in the data home (docs/integrity.md §5).

* ``holdout add --project PATH --name NAME --area AREA [--timeout-ms N] [--file REL=LOCALPATH …]
  -- CMD ARGS…`` — register a check (``--file``: the local file's UTF-8 text is written at the
  project-relative ``REL`` of the pristine tree before ``CMD`` runs);
* ``holdout list --project PATH`` — the registered checks' names and areas (never a command or
  a file: a person may show this output to an agent);
* ``holdout remove --project PATH --name NAME`` — drop one (the project may be gone already).

The checks live in ``<home>/holdout/<key>.json`` (:mod:`tianshu_mcp.acceptance.integrity.
holdout_store`), written atomically with mode 0600 under a lock. Success prints one JSON object on
stdout and exits 0; bad input (a check :class:`~tianshu_mcp.acceptance.integrity.models.
HoldoutCheck` refuses, a refused project path, a duplicate or unknown name, more than 20 checks)
prints ``Error: [CODE] message`` on stderr and exits 2 without writing anything; another coded
failure (a damaged holdout file: ``CONFIG_INVALID``; a file that cannot be written) exits 1.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..acceptance.integrity.holdout_store import (
    describe_error,
    load_project_holdout,
    project_holdout_lock,
    project_holdout_path,
    save_project_holdout,
)
from ..acceptance.integrity.models import MAX_HOLDOUT_CHECKS, MAX_HOLDOUT_FILE_BYTES, HoldoutCheck
from ..core.errors import ErrorCode, TianshuError
from ..core.paths import check_project_path, norm_path
from ..core.settings import data_home
from .commands import print_json

USAGE = """usage: tianshu-mcp holdout add --project PATH --name NAME --area AREA [--timeout-ms N]
                               [--file REL=LOCALPATH ...] -- CMD ARGS...
       tianshu-mcp holdout list --project PATH      the registered checks' names and areas (never a command)
       tianshu-mcp holdout remove --project PATH --name NAME

Holdout checks run on every verification of the project and are never shown to the agent; a
failure names only its AREA. Kept in <home>/holdout/<key>.json (mode 0600). Output is JSON on
stdout; exit 0 ok, 2 bad input (nothing written), 1 another failure."""

_INPUT_CODES = frozenset({ErrorCode.INVALID_ARGUMENT, ErrorCode.PATH_NOT_ABSOLUTE, ErrorCode.PATH_NOT_FOUND,
                          ErrorCode.PATH_IS_HOME, ErrorCode.PATH_IS_SYSTEM, ErrorCode.PATH_IS_DATA_HOME})
"""Codes of bad input (exit 2); any other coded failure exits 1."""


class _Parser(argparse.ArgumentParser):
    """argparse that raises instead of exiting (its message becomes an INVALID_ARGUMENT)."""

    def error(self, message: str) -> Any:  # type: ignore[override]
        raise TianshuError(ErrorCode.INVALID_ARGUMENT, f"{self.prog}: {message} (see tianshu-mcp holdout --help)")


def _parser(action: str) -> _Parser:
    parser = _Parser(prog=f"tianshu-mcp holdout {action}", add_help=False)
    parser.add_argument("--project", required=True)
    if action in ("add", "remove"):
        parser.add_argument("--name", required=True)
    if action == "add":
        parser.add_argument("--area", required=True)
        parser.add_argument("--timeout-ms", type=int, default=None, dest="timeout_ms")
        parser.add_argument("--file", action="append", default=[], dest="files", metavar="REL=LOCALPATH")
    return parser


def _files(specs: list[str]) -> dict[str, str]:
    """``--file REL=LOCALPATH`` values as ``{REL: the local file's UTF-8 text}``.

    Raises:
        TianshuError: INVALID_ARGUMENT for a value without ``=``, a repeated ``REL``, or a local
            file that cannot be read as UTF-8 text.
    """
    files: dict[str, str] = {}
    for spec in specs:
        rel, sep, local = spec.partition("=")
        if not sep or not rel or not local:
            raise TianshuError(ErrorCode.INVALID_ARGUMENT, f"--file {spec!r}: expected REL=LOCALPATH")
        if rel in files:
            raise TianshuError(ErrorCode.INVALID_ARGUMENT, f"--file {rel!r} is given twice")
        try:
            with open(Path(local).expanduser(), "rb") as fh:  # bounded: /dev/zero must not fill the memory
                data = fh.read(MAX_HOLDOUT_FILE_BYTES + 1)
            if len(data) > MAX_HOLDOUT_FILE_BYTES:
                raise TianshuError(ErrorCode.INVALID_ARGUMENT, f"--file {rel}={local}: files hold at most "
                                                               f"{MAX_HOLDOUT_FILE_BYTES} bytes")
            files[rel] = data.decode("utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise TianshuError(ErrorCode.INVALID_ARGUMENT, f"--file {rel}={local}: cannot be read as UTF-8 text "
                                                           f"({exc})") from exc
    return files


def _project(raw: str, gone_ok: bool, home: Path | None = None) -> str:
    """The normalised project path of ``--project`` (through the projectPath gate against ``home``,
    default the data home; for ``remove`` a project that no longer exists is accepted). Raises
    TianshuError (PATH_* codes)."""
    path = os.path.abspath(os.path.expanduser(raw))
    if gone_ok and not os.path.isdir(path):
        return norm_path(os.path.realpath(path))
    return check_project_path(path, home or data_home()).norm


def _add(opts: argparse.Namespace, cmd: list[str]) -> dict[str, Any]:
    home = data_home()
    project = _project(opts.project, gone_ok=False)
    entry: dict[str, Any] = {"name": opts.name, "cmd": cmd, "area": opts.area, "files": _files(opts.files)}
    if opts.timeout_ms is not None:
        entry["timeoutMs"] = opts.timeout_ms
    try:
        check = HoldoutCheck.model_validate(entry)
    except ValidationError as exc:
        raise TianshuError(ErrorCode.INVALID_ARGUMENT, describe_error(exc, "holdout check")) from exc
    with project_holdout_lock(home, project):
        checks = load_project_holdout(home, project)
        if any(c.name == check.name for c in checks):
            raise TianshuError(ErrorCode.INVALID_ARGUMENT, f"a holdout check named {check.name!r} is already registered "
                                                           f"for {project}; remove it first")
        if len(checks) >= MAX_HOLDOUT_CHECKS:
            raise TianshuError(ErrorCode.INVALID_ARGUMENT, f"{project} has {len(checks)} holdout checks, at most "
                                                           f"{MAX_HOLDOUT_CHECKS} allowed")
        path = save_project_holdout(home, project, [*checks, check])
    return {"ok": True, "projectPath": project, "added": check.name, "area": check.area, "count": len(checks) + 1,
            "file": str(path)}


def _list(opts: argparse.Namespace) -> dict[str, Any]:
    home = data_home(create=False)  # reads only: a missing home has no holdout checks
    project = _project(opts.project, gone_ok=True, home=home)
    checks = load_project_holdout(home, project) if home.is_dir() else []
    return {"ok": True, "projectPath": project, "file": str(project_holdout_path(home, project)),
            "checks": [{"name": c.name, "area": c.area} for c in checks]}


def _remove(opts: argparse.Namespace) -> dict[str, Any]:
    home = data_home()
    project = _project(opts.project, gone_ok=True)
    with project_holdout_lock(home, project):
        checks = load_project_holdout(home, project)
        kept = [c for c in checks if c.name != opts.name]
        if len(kept) == len(checks):
            raise TianshuError(ErrorCode.INVALID_ARGUMENT, f"no holdout check named {opts.name!r} is registered for "
                                                           f"{project}")
        save_project_holdout(home, project, kept)
    return {"ok": True, "projectPath": project, "removed": opts.name, "count": len(kept)}


def main(argv: list[str]) -> int:
    """``tianshu-mcp holdout …``; returns the exit code (0 ok, 2 bad input, 1 another failure)."""
    if not argv or argv[0] in ("--help", "-h", "help"):
        print(USAGE)
        return 0 if argv else 2
    action, rest = argv[0], argv[1:]
    cmd: list[str] = []
    if "--" in rest:
        cut = rest.index("--")
        rest, cmd = rest[:cut], rest[cut + 1:]
    try:
        if action not in ("add", "list", "remove"):
            raise TianshuError(ErrorCode.INVALID_ARGUMENT, f"unknown holdout action {action!r}: add, list or remove")
        if any(a in ("--help", "-h") for a in rest):
            print(USAGE)
            return 0
        if cmd and action != "add":
            raise TianshuError(ErrorCode.INVALID_ARGUMENT, f"holdout {action} takes no command after --")
        opts = _parser(action).parse_args(rest)
        out = _add(opts, cmd) if action == "add" else _list(opts) if action == "list" else _remove(opts)
    except TianshuError as exc:
        print(exc.render(), file=sys.stderr)
        return 2 if exc.code in _INPUT_CODES else 1
    except OSError as exc:
        print(TianshuError(ErrorCode.CONFIG_INVALID, f"the holdout file cannot be written: {exc}").render(),
              file=sys.stderr)
        return 1
    print_json(out)
    return 0
