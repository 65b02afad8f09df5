"""``acceptanceTampering`` (docs/acceptance.md §8.6): changed files that decide how the work is judged — the
acceptance configuration, files the checks name, test-runner/CI configuration, Python start-up
hooks, pytest outcome hooks: :func:`scan_tampering`."""

from __future__ import annotations

from typing import Sequence

from .context import ScanContext
from .rules import (
    _ACCEPTANCE_FILE_RE,
    _MAKEFILE_RE,
    _OUTCOME_HOOK_RE,
    _STARTUP_HOOK_RE,
    _argv_paths,
    _config_edit,
)

__all__ = ["scan_tampering"]


def scan_tampering(ctx: ScanContext, changed_files: Sequence[str], check_argvs: Sequence[Sequence[str]],
                   project_prefix: str) -> None:
    """Count one ``acceptanceTampering`` hit per changed or deleted file that is the project's
    ``.tianshu-mcp/acceptance.json``, a file named in a check argv (relative tokens resolved
    against ``project_prefix``; a Makefile when a check runs ``make``), a Python start-up hook, a
    ``conftest.py`` gaining a hook that can rewrite test outcomes, or a test-runner/CI config edit
    (:func:`.rules._config_edit`)."""
    argv_paths, uses_make = _argv_paths(check_argvs, project_prefix.strip("/"))
    for path in dict.fromkeys([*changed_files, *ctx.deleted]):
        why = _why(ctx, path, argv_paths, uses_make)
        if why:
            ctx.hit("acceptanceTampering", path, why)


def _why(ctx: ScanContext, path: str, argv_paths: set[str], uses_make: bool) -> str | None:
    """Why a change of ``path`` is tampering with acceptance, or None."""
    if _ACCEPTANCE_FILE_RE.search(path):
        return "acceptance configuration (.tianshu-mcp/acceptance.json) edited"
    if path in argv_paths:
        return "file named in an acceptance check command was " + ("deleted" if path in ctx.deleted_set else "edited")
    if uses_make and _MAKEFILE_RE.search(path):
        return "Makefile edited while a check runs make"
    if _STARTUP_HOOK_RE.search(path):
        return "Python start-up hook (sitecustomize, usercustomize, a .pth file) added or edited: it runs in every check"
    if path.rsplit("/", 1)[-1] == "conftest.py" and any(_OUTCOME_HOOK_RE.search(ln) for ln in ctx.added.get(path, ())):
        # breaker: a conftest.py hook turned failing tests into passes with no signal at all
        return "pytest hook that can rewrite test outcomes added to conftest.py"
    return _config_edit(path, [*ctx.added.get(path, ()), *ctx.removed.get(path, ())])
