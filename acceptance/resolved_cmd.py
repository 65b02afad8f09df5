"""Which program a check really ran: its ``argv[0]`` resolved the way the check's process resolved it,
the script's interpreter and a version line (:func:`resolve_command`, a check's ``resolved``).

A configured ``pytest -q`` says nothing about *which* pytest ran; a ``pytest`` from another
environment (``~/.local/bin``, a global install) fails on a module the project's environment has, and
the report must show that. The path is found as ``exec`` finds it: a name with a ``/`` relative to the
check's working directory, any other name with :func:`shutil.which` over the check's own ``PATH``
(:func:`.runner.check_env`: the project's ``.venv/bin`` and ``node_modules/.bin`` first).

The version is read cheaply, and only for well-known tools (:data:`VERSIONED_TOOLS`): a Python
console script's interpreter comes from its ``#!`` line, its version from the distribution's
metadata beside that interpreter (``<venv>/lib/python*/site-packages/<name>-<version>.dist-info``), a
virtualenv's Python's from its ``pyvenv.cfg``; otherwise ``<exe> --version`` runs once, with a
short timeout, and its first line is cached per executable path and modification time for the life
of the process. Never raises.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import threading
from pathlib import Path
from typing import Mapping

from pydantic import BaseModel

__all__ = ["ResolvedCommand", "resolve_command", "VERSIONED_TOOLS", "VERSION_TIMEOUT_S"]

VERSIONED_TOOLS = frozenset(
    "pytest py.test python python3 node npm npx pnpm yarn bun deno go cargo rustc ruff mypy pyright tsc jest "
    "vitest eslint prettier tox nox uv poetry pip pip3 mvn gradle java dotnet php composer ruby bundle rspec "
    "make cmake ctest swift".split()
)
"""Programs whose version line a report shows (others: the path only)."""

VERSION_TIMEOUT_S = 5.0
"""``<exe> --version`` is given at most this long (s)."""

_cache: dict[tuple[str, int], str | None] = {}
_cache_lock = threading.Lock()


class ResolvedCommand(BaseModel):
    """A check's program as it ran: ``{path, interpreter?, version?}`` in the report (``resolved``).

    Attributes:
        path: the executable file ``argv[0]`` resolved to (absolute, symbolic links kept).
        interpreter: the program of its ``#!`` line (``/usr/bin/env python3`` resolved over the
            check's ``PATH``), or None for a binary.
        version: the tool's version line (``pytest 8.3.4``, ``Python 3.12.3``), or None when not a
            well-known tool or not found.
    """

    path: str
    interpreter: str | None = None
    version: str | None = None

    def to_json(self) -> dict[str, str]:
        """``{"path", "interpreter"?, "version"?}`` (None left out)."""
        return self.model_dump(exclude_none=True)


def _which(name: str, cwd: Path, env: Mapping[str, str]) -> Path | None:
    if "/" in name:
        p = Path(name) if os.path.isabs(name) else cwd / name
        return p if p.is_file() and os.access(p, os.X_OK) else None
    found = shutil.which(name, path=env.get("PATH", os.defpath))
    if found is None:
        return None
    p = Path(found)
    return p if p.is_absolute() else cwd / p


def _shebang(path: Path, cwd: Path, env: Mapping[str, str]) -> str | None:
    """The interpreter of a script's ``#!`` line (``env``'s argument resolved), or None."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(256)
    except OSError:
        return None
    if not head.startswith(b"#!"):
        return None
    words = head[2:].split(b"\n", 1)[0].decode("utf-8", errors="replace").split()
    if not words:
        return None
    if os.path.basename(words[0]) == "env":
        args = [w for w in words[1:] if not w.startswith("-") and "=" not in w]
        if not args:
            return words[0]
        found = _which(args[0], cwd, env)
        return str(found) if found is not None else args[0]
    return words[0]


def _python(interpreter: str | None) -> bool:
    return interpreter is not None and re.fullmatch(r"python[\d.]*", os.path.basename(interpreter)) is not None


def _venv_python_version(python: Path) -> str | None:
    """``Python 3.12.3`` from the ``pyvenv.cfg`` of the virtualenv ``python`` belongs to, or None."""
    try:
        text = (python.parent.parent / "pyvenv.cfg").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    m = re.search(r"^\s*(?:version|version_info)\s*=\s*(\d+\.\d+(?:\.\d+)?)", text, re.M)
    return f"Python {m.group(1)}" if m else None


def _dist_version(name: str, python: Path) -> str | None:
    """``<name> <version>`` from a ``<name>-<version>.dist-info`` beside a virtualenv's ``python``."""
    norm = re.sub(r"[-_.]+", "_", name).lower()
    for site in sorted((python.parent.parent / "lib").glob("python*/site-packages")):
        for info in site.glob("*.dist-info"):
            dist, _sep, version = info.name[: -len(".dist-info")].partition("-")
            if re.sub(r"[-_.]+", "_", dist).lower() == norm and version:
                return f"{name} {version}"
    return None


def _run_version(path: Path, cwd: Path, env: Mapping[str, str]) -> str | None:
    """The first non-empty line ``<path> --version`` prints (cached per path and mtime), or None."""
    try:
        key = (str(path), path.stat().st_mtime_ns)
    except OSError:
        return None
    with _cache_lock:
        if key in _cache:
            return _cache[key]
    line: str | None = None
    try:
        out = subprocess.run([str(path), "--version"], cwd=cwd, env=dict(env), stdin=subprocess.DEVNULL,
                             capture_output=True, timeout=VERSION_TIMEOUT_S, start_new_session=True, check=False)
        text = (out.stdout or out.stderr).decode("utf-8", errors="replace")
        line = next((ln.strip() for ln in text.splitlines() if ln.strip()), None)
        line = line[:200] if line else None
    except (OSError, subprocess.SubprocessError, ValueError):
        line = None
    with _cache_lock:
        _cache[key] = line
    return line


def resolve_command(argv0: str, cwd: str | os.PathLike[str], env: Mapping[str, str]) -> ResolvedCommand | None:
    """The program ``argv0`` names for a check run in ``cwd`` with environment ``env`` (see the
    module docstring); None when it resolves to no executable file. Never raises."""
    try:
        root = Path(cwd)
        path = _which(argv0, root, env)
        if path is None:
            return None
        interpreter = _shebang(path, root, env)
        name = os.path.basename(argv0)
        version: str | None = None
        if name in VERSIONED_TOOLS or re.fullmatch(r"python[\d.]*", name):
            if _python(interpreter) and interpreter is not None:
                version = _dist_version(name, Path(interpreter))
            elif re.fullmatch(r"python[\d.]*", name):
                version = _venv_python_version(path)
            version = version or _run_version(path, root, env)
            if version and name.lower().split(".")[0] not in version.lower():
                version = f"{name} {version}"  # node's plain "v20.1.0"
        return ResolvedCommand(path=str(path), interpreter=interpreter, version=version)
    except Exception:  # noqa: BLE001 - what ran is information; it never breaks a check
        return None
