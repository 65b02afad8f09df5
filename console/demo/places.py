"""Where ``tianshu-mcp demo`` writes, how it says so before it starts, and ``demo --clean``.

The demo writes three things, and nothing else:

* its data home (default ``~/.tianshu-mcp-demo``, ``--home DIR``), Prefect's database included;
* its projects directory beside it, ``<home>-demo-projects`` (never inside the home: the path gate
  refuses projects in the data home), one generated repository per run;
* the migrated Prefect database template every home on this machine starts from,
  ``$XDG_CACHE_HOME/tianshu-mcp`` (``~/.cache/tianshu-mcp``), when it is not there yet.

It never installs the tianshu-mcp skill (the server it starts runs with
``TIANSHU_MCP_NO_SKILL_INSTALL=1``). Each directory the demo creates gets a marker file
(:data:`MARKER`); ``--clean`` removes only directories carrying it, and the database template only
when the marker records that a demo run created it.
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

MARKER = ".tianshu-mcp-demo"
"""File name of the marker the demo writes into each directory it creates (JSON:
``{"createdBy", "createdAt", "home", "projectsDir", "templateCreated"}``)."""


@dataclass(frozen=True)
class DemoPlaces:
    """The paths of one demo home: ``home``, ``projects`` (its projects directory) and ``template``
    (the shared Prefect database template file)."""

    home: Path
    projects: Path
    template: Path

    @classmethod
    def of(cls, home: Path) -> DemoPlaces:
        """The places of the demo home ``home`` (absolute, resolved)."""
        from ...hosting.dbseed import template_path

        home = home.expanduser().resolve()
        return cls(home=home, projects=home.parent / f"{home.name}-demo-projects", template=template_path())

    def announcement(self) -> str:
        """The lines the demo prints before it writes anything."""
        template = (f"{self.template} (kept if it exists already)" if self.template.exists()
                    else f"{self.template} (created now: the migrated database every data home starts from)")
        return "\n".join([
            "tianshu-mcp demo writes:",
            f"  data home    : {self.home}",
            f"  projects     : {self.projects}",
            f"  Prefect db template: {template}",
            "  agent skill  : not installed (the demo's server runs with TIANSHU_MCP_NO_SKILL_INSTALL=1)",
            f"remove them with: tianshu-mcp demo --clean{self._home_flag()}",
        ])

    def _home_flag(self) -> str:
        default = (Path.home() / ".tianshu-mcp-demo").resolve()
        return "" if self.home == default else f" --home {self.home}"

    def check(self) -> None:
        """Refuse a home or projects directory the demo did not create, before anything is written.

        Raises:
            SystemExit: one exists, is not empty and carries no marker (such as a real
                ``~/.tianshu-mcp``: the demo never writes into it).
        """
        for path in (self.home, self.projects):
            if path.is_dir() and any(path.iterdir()) and not (path / MARKER).is_file() and not _earlier_demo(path):
                raise SystemExit(f"tianshu-mcp demo: {path} exists and was not created by the demo "
                                 f"(no {MARKER} file in it); choose another --home")

    def prepare(self) -> None:
        """Create the home and the projects directory with their markers (after :meth:`check`)."""
        created = not self.template.exists()
        for path in (self.home, self.projects):
            path.mkdir(parents=True, exist_ok=True)
            marker = path / MARKER
            old = _read_marker(marker) or {}
            data = {"createdBy": "tianshu-mcp demo", "createdAt": old.get("createdAt") or time.strftime("%Y-%m-%dT%H:%M:%S"),
                    "home": str(self.home), "projectsDir": str(self.projects),
                    "templateCreated": bool(old.get("templateCreated")) or created}
            marker.write_text(json.dumps(data, indent=2) + "\n")


def _earlier_demo(path: Path) -> bool:
    """Whether ``path`` is a home or projects directory of a demo run from before the markers: a
    home whose only agent profile is ``scripted-demo``, or a directory holding only ``calc-*``
    repositories. Such a directory is adopted (marked) rather than refused."""
    names = [p.name for p in path.iterdir()]
    if names and all(n.startswith("calc-") for n in names):
        return True
    try:
        profiles = json.loads((path / "agent-profiles.json").read_text()).get("profiles")
    except (OSError, ValueError, AttributeError):
        return False
    return isinstance(profiles, dict) and set(profiles) == {"scripted-demo"}


def _read_marker(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("createdBy") == "tianshu-mcp demo" else None


def clean(places: DemoPlaces) -> tuple[list[str], int]:
    """``demo --clean``: stop the home's service, remove the home and the projects directory when
    they carry the demo's marker, and the database template when the marker says a demo run
    created it. Returns ``(lines to print, exit code)``: 0 when everything present was removed,
    1 when a directory was refused (it exists without the marker: not a demo directory)."""
    lines: list[str] = []
    code = 0
    marker = _read_marker(places.home / MARKER) or _read_marker(places.projects / MARKER)
    if places.home.is_dir() and marker is not None:
        lines.extend(_stop_service(places.home))
    for label, path in (("data home", places.home), ("projects", places.projects)):
        if not path.exists():
            lines.append(f"{label}: nothing at {path}")
        elif _read_marker(path / MARKER) is None:
            lines.append(f"{label}: {path} is not a demo directory (no {MARKER} marker): left alone")
            code = 1
        else:
            shutil.rmtree(path)
            lines.append(f"{label}: removed {path}")
    if marker is not None and marker.get("templateCreated") and places.template.exists():
        for path in places.template.parent.glob(places.template.name + "*"):  # its -wal, -shm and .lock too
            path.unlink(missing_ok=True)
        lines.append(f"Prefect db template: removed {places.template} (a demo run created it)")
        if places.template.parent.is_dir() and not any(places.template.parent.iterdir()):
            places.template.parent.rmdir()
    else:
        lines.append("Prefect db template: left alone (the demo did not create it, or it is gone)")
    lines.append("agent skill: nothing to remove (the demo never installs it)")
    return lines, code


def _stop_service(home: Path) -> list[str]:
    """Stop the demo home's background service before its files go; the lines to print."""
    from ...core.errors import TianshuError
    from ...hosting import launcher

    try:
        result = launcher.stop(home)
    except TianshuError as exc:
        return [f"service: {exc.message}"]
    return [f"service: {result['message']}"] if result.get("pid") else []
