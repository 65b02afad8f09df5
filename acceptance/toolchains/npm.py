"""npm scripts: the ``npm run <script>`` checks of a project whose ``package.json`` has scripts.

Source: docs/acceptance.md §2.3 (step 1): ``typecheck``/``lint``/``test``/``build``, each present one
mandatory, in that order; the output of each is read by the toolchain it runs (``npm run lint``
printing ESLint's format is read by :mod:`.eslint` by its shape).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Sequence

from ...core.i18n import _
from .base import Derived, Detection, TestInfra, Toolchain, read_json_object

SCRIPTS = ("typecheck", "lint", "test", "build")
"""The scripts derived as checks, in this order."""


def package_scripts(root: Path) -> dict[str, Any] | None:
    """The non-empty ``scripts`` object of ``<root>/package.json``; None when there is none (no
    file, unreadable, not JSON, no or empty ``scripts``)."""
    data = read_json_object(root / "package.json") or {}
    scripts = data.get("scripts")
    return scripts if isinstance(scripts, dict) and scripts else None


def _detect(root: Path, already: Sequence[Derived]) -> Detection:
    """``npm run <s>`` for each of typecheck/lint/test/build present (mandatory), with a note
    naming the missing ones."""
    scripts = package_scripts(root)
    if scripts is None:
        return [], []
    checks = [Derived(s, ("npm", "run", s)) for s in SCRIPTS if s in scripts]
    missing = [s for s in SCRIPTS if s not in scripts]
    if not checks:
        return [], [_("package.json has no typecheck/lint/test/build script; only the basic checks run.")]
    if missing:
        return checks, [_("package.json lacks scripts (skipped): {scripts}.").format(scripts="/".join(missing))]
    return checks, []



INFRA = TestInfra(
    json_keys=(("package.json", ("scripts", "jest", "mocha", "vitest", "ava", "c8", "nyc", "tap", "babel",
                                 "node-options", "config")),),
)
"""npm's test infrastructure: the ``package.json`` keys a check's ``npm test`` reads (its scripts and
the runners' config blocks); dependencies and the rest stay the agent's (docs/integrity.md)."""

TOOLCHAIN = Toolchain(
    id="npm",
    order=10,
    detect=_detect,
    test_command=re.compile(r"\bnpm\s+run\s+test(?:\b|:)"),
    infra=INFRA,
)
