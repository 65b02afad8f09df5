"""Layering: a layer never imports the layers above it (README "Layout"): console → mcp_server →
hosting → deployments → flows → tasks → {adapters, acceptance} → core, one way (so no cycle between layers),
and adapters and acceptance never import each other. Acceptance is plain Python that judges
work: it never imports adapters, tasks, flows, mcp_server or deployments.

Pure ``ast`` over the source files (relative imports resolved against the file's package):
nothing is imported or run.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "tianshu_mcp"

FORBIDDEN_IMPORTS: dict[str, tuple[str, ...]] = {
    "core": ("adapters", "acceptance", "tasks", "flows", "deployments", "hosting", "mcp_server", "console"),
    "adapters": ("acceptance", "tasks", "flows", "deployments", "hosting", "mcp_server", "console"),
    "acceptance": ("adapters", "tasks", "flows", "deployments", "hosting", "mcp_server", "console"),
    "tasks": ("flows", "deployments", "hosting", "mcp_server", "console"),
    "flows": ("deployments", "hosting", "mcp_server", "console"),
    "deployments": ("hosting", "mcp_server", "console"),
    "hosting": ("mcp_server", "console"),
    "mcp_server": ("console",),
}
"""Per layer (a top-level folder), the layers its modules may not import."""


def imported_modules(path: Path, layer: str) -> list[tuple[int, str]]:
    """``(line, absolute module)`` of each import of ``path`` (a file under the folder ``layer``),
    relative ones resolved (``from ..x import y`` in ``acceptance/engine/a.py`` →
    ``tianshu_mcp.acceptance.x``)."""
    rel = path.relative_to(ROOT / layer).with_suffix("")
    package = [PACKAGE, layer, *rel.parts[:-1]]  # the package of a module, or of an __init__.py
    out: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.extend((node.lineno, a.name) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                out.append((node.lineno, ".".join([*base, *([node.module] if node.module else [])])))
            elif node.module:
                out.append((node.lineno, node.module))
    return out


def test_no_layer_imports_a_layer_above_it() -> None:
    offenders: list[str] = []
    for layer, forbidden in FORBIDDEN_IMPORTS.items():
        for path in sorted((ROOT / layer).rglob("*.py")):
            for line, module in imported_modules(path, layer):
                top = module.split(".")
                if len(top) > 1 and top[0] == PACKAGE and top[1] in forbidden:
                    offenders.append(f"{path.relative_to(ROOT)}:{line} imports {module}")
    assert not offenders, "layer imports a layer above it:\n  " + "\n  ".join(offenders)


def test_relative_imports_are_resolved_against_the_package() -> None:
    modules = {m for _line, m in imported_modules(ROOT / "acceptance" / "engine" / "pipeline.py", "acceptance")}
    assert {"tianshu_mcp.core.procs", "tianshu_mcp.acceptance.engine.changes"} <= modules
    modules = {m for _line, m in imported_modules(ROOT / "acceptance" / "engine" / "__init__.py", "acceptance")}
    assert {"tianshu_mcp.acceptance.verdict", "tianshu_mcp.acceptance.engine.pipeline"} <= modules
