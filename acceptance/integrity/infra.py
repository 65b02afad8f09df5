"""Which files are *test infrastructure* (docs/integrity.md): what an agent must not be able to change to
make its own work pass.

Every toolchain declares its part (:class:`~..toolchains.base.TestInfra`); this module adds what
belongs to no toolchain (``Makefile``, ``justfile``, task runners, the acceptance rules) and every
project file a check's command line names (``bash scripts/test.sh``, ``--require ./setup.js``,
``--config jest.ci.js``). The union of all toolchains applies to every project: a Python project's
``test/`` directory of JavaScript files is test infrastructure too.

Paths are POSIX paths relative to the repository's top level.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Callable, Sequence

from ...core.i18n import _
from ..toolchains.registry import toolchains

__all__ = ["InfraKind", "InfraRules", "glob_regex", "infra_rules"]

GENERIC_FILES = ("Makefile", "makefile", "GNUmakefile", "*.mk", "justfile", "Justfile", ".justfile",
                 "Taskfile.yml", "Taskfile.yaml", "Rakefile", ".tianshu-mcp/**",
                 "**/fixtures/**", "**/testdata/**", "**/test_data/**", "**/test-data/**", "**/__snapshots__/**",
                 "*.snap")
"""Test infrastructure of no toolchain: the task runners a check may call, the project's
acceptance rules (also pinned, :mod:`..pinning`), and the conventional homes of test data and
snapshots (``fixtures/``, Go's ``testdata/``, Jest's ``__snapshots__``) wherever they are: the
expected values a test reads are part of the test (breaker finding: a ``fixtures/cases.json``
outside ``tests/`` lost its failing case). Data a test reads from anywhere else is the agent's
code (README, "What it does not cover")."""


class InfraKind(str, Enum):
    """How a test-infrastructure file is kept at the baseline in the pristine tree."""

    FILE = "file"
    """The whole file is the baseline's (a new one is left out, a deleted one comes back)."""
    JSON_KEYS = "json-keys"
    """Some top-level keys of a JSON file are the baseline's (``package.json`` ``scripts``)."""
    EMBEDDED = "embedded"
    """A source file whose test code (Rust ``#[cfg(test)]`` modules) is the baseline's."""


def glob_regex(pattern: str) -> re.Pattern[str]:
    """A glob as a regex over a POSIX relative path: a pattern without ``/`` matches a file name in
    any directory; ``**/`` spans zero or more directories, ``/**`` everything below; ``*`` and
    ``?`` never cross ``/``.

    Example:
        >>> bool(glob_regex("**/tests/**").fullmatch("pkg/tests/data/x.json"))
        True
    """
    if "/" not in pattern:
        pattern = "**/" + pattern
    out = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("/**", i) and i + 3 == len(pattern):
            out.append("/.*")
            i += 3
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out))


@dataclass
class InfraRules:
    """The compiled test-infrastructure rules of one project.

    Attributes:
        files: whole-file globs (toolchains, :data:`GENERIC_FILES`).
        argv_files: top-relative paths named by the checks' command lines.
        json_keys: file name → the top-level keys kept at the baseline.
        embedded: ``(glob, spans)`` for source files with test code inside.
        aware: ``(glob, patterns)`` of test-aware production code.
        dirs: top-relative directories whose every file is test infrastructure (the targets of
            symlinked test directories, :func:`follow_test_links`).
    """

    files: list[re.Pattern[str]] = field(default_factory=list)
    argv_files: set[str] = field(default_factory=set)
    json_keys: dict[str, tuple[str, ...]] = field(default_factory=dict)
    embedded: list[tuple[re.Pattern[str], Callable[[str], list[tuple[int, int]]]]] = field(default_factory=list)
    aware: list[tuple[re.Pattern[str], tuple[re.Pattern[str], ...]]] = field(default_factory=list)
    dirs: set[str] = field(default_factory=set)

    def kind(self, rel: str) -> InfraKind | None:
        """How ``rel`` (top-relative POSIX path) is kept in the pristine tree; None: the agent's.

        A path that would hold test files (``tests``, a symlink to a test directory) is kept too,
        and so is everything below :attr:`dirs` (a test directory's symlink target)."""
        if rel in self.argv_files or any(p.fullmatch(rel) or p.fullmatch(rel + "/_") for p in self.files):
            return InfraKind.FILE
        if any(rel == d or rel.startswith(d + "/") for d in self.dirs):
            return InfraKind.FILE
        if os.path.basename(rel) in self.json_keys:
            return InfraKind.JSON_KEYS
        if any(g.fullmatch(rel) for g, _fn in self.embedded):
            return InfraKind.EMBEDDED
        return None

    def spans(self, rel: str) -> Callable[[str], list[tuple[int, int]]] | None:
        """The embedded-test finder for ``rel``, or None."""
        return next((fn for g, fn in self.embedded if g.fullmatch(rel)), None)

    def aware_patterns(self, rel: str) -> list[re.Pattern[str]]:
        """The test-awareness patterns that apply to the source file ``rel``."""
        return [p for g, pats in self.aware if g.fullmatch(rel) for p in pats]


def _argv_files(argvs: Sequence[Sequence[str]], project: Path, top: Path) -> set[str]:
    out: set[str] = set()
    for argv in argvs:
        for k, tok in enumerate(argv):
            cand = tok.split("=", 1)[1] if tok.startswith("-") and "=" in tok else tok
            if not cand or cand.startswith("-") or "\0" in cand or (k == 0 and "/" not in cand):
                continue
            path = Path(cand) if os.path.isabs(cand) else project / cand
            try:
                real = Path(os.path.realpath(path))
                if real.is_file():
                    out.add(real.relative_to(os.path.realpath(top)).as_posix())
            except (OSError, ValueError):
                continue
    return out


def infra_rules(check_argvs: Sequence[Sequence[str]], project: str | os.PathLike[str],
                top: str | os.PathLike[str] | None = None) -> InfraRules:
    """The test-infrastructure rules for a project and its checks.

    Args:
        check_argvs: the round's check command lines (files they name are infrastructure).
        project: the project root; ``top``: the repository's top level (default: the project).

    Returns:
        :class:`InfraRules`. Never raises.
    """
    rules = InfraRules()
    globs: list[str] = list(GENERIC_FILES)
    for tc in toolchains():
        infra = tc.infra
        if infra is None:
            continue
        globs.extend(infra.files)
        for name, keys in infra.json_keys:
            rules.json_keys[name] = tuple(dict.fromkeys((*rules.json_keys.get(name, ()), *keys)))
        if infra.embedded is not None:
            rules.embedded.extend((glob_regex(g), infra.embedded) for g in infra.embedded_files)
        if infra.aware:
            rules.aware.extend((glob_regex(g), infra.aware) for g in infra.aware_files)
    rules.files = [glob_regex(g) for g in dict.fromkeys(globs)]
    rules.argv_files = _argv_files(check_argvs, Path(project), Path(top if top is not None else project))
    return rules


def id_argv(argv: Sequence[str]) -> list[str]:
    """``argv`` with the id-listing flags of the toolchain whose ``hint`` it matches (pytest
    ``-rA``, go ``-v``, unittest ``-v``); unchanged when none applies. For verification's own runs."""
    joined = " ".join(argv).lower()
    for tc in toolchains():
        if tc.infra is not None and tc.infra.id_argv is not None and tc.hint is not None and tc.hint.search(joined):
            return tc.infra.id_argv(list(argv))
    return list(argv)


def follow_test_links(rules: InfraRules, top: Path, tracked_links: Sequence[str]) -> list[str]:
    """Make the in-repository targets of symlinked test directories test infrastructure too
    (``tests -> suites/unit``: every file under ``suites/unit``); returns a note for each one that
    points outside the repository (its files cannot be kept at the baseline).

    Args:
        rules: updated in place (:attr:`InfraRules.dirs`).
        top: the repository's top level; ``tracked_links``: top-relative paths of tracked symlinks.
    """
    notes: list[str] = []
    real_top = os.path.realpath(top)
    for link in tracked_links:
        if rules.kind(link) is not InfraKind.FILE:
            continue
        target = os.path.realpath(top / link)
        if not os.path.isdir(target):
            continue
        if target == real_top or target.startswith(real_top + os.sep):
            rel = Path(target).relative_to(real_top).as_posix()
            if rel and rel != ".":
                rules.dirs.add(rel)
        else:
            notes.append(_("the test directory {link} links outside the repository ({target}): its files are not "
                           "under the baseline's control; the tests there run as they are now").format(
                               link=link, target=target))
    return notes
