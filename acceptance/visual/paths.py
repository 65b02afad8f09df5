"""The project path gate of every file the visual stage reads or writes (docs/visual.md §5).

Kept apart from image decoding (:mod:`.decode`) so that the flows, which gate paths at import,
do not import NumPy and Pillow with it: a flow-run process needs them only when it compares images.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from .errors import VisualError


def project_file(root: str | os.PathLike[str], rel: str) -> Path:
    """The real path of ``rel`` inside the project ``root`` (docs/visual.md §5 project path gate).

    ``rel`` is resolved against ``realpath(root)``; ``..`` or an absolute path leaving the root is
    refused; then the deepest existing ancestor is resolved (symlinks included) and must still lie in
    the root. A missing tail is allowed (the returned path may not exist). A dangling symlink on the
    way is resolved too, so it cannot point a later create outside the project.

    Raises:
        VisualError: ``PATH_OUTSIDE_PROJECT`` (blocked) for an escape, a NUL byte, or an ancestor that
            cannot be resolved (symlink loop, permission).
    """
    if "\0" in rel:
        raise VisualError("PATH_OUTSIDE_PROJECT", "Path contains a NUL byte")
    real_root = os.path.realpath(os.fspath(root))
    target = os.path.normpath(os.path.join(real_root, rel))
    if not _within(real_root, target):
        raise VisualError("PATH_OUTSIDE_PROJECT", f"Path escapes the project: {rel}")
    ancestor = target
    while True:
        try:
            real = os.path.realpath(ancestor, strict=True)
        except OSError as exc:
            if exc.errno not in (errno.ENOENT, errno.ENOTDIR):
                raise VisualError("PATH_OUTSIDE_PROJECT", f"Path cannot be resolved safely: {rel}") from exc
            if os.path.islink(ancestor) and not _within(real_root, os.path.realpath(ancestor)):
                raise VisualError("PATH_OUTSIDE_PROJECT", f"Symlink escapes the project: {rel}") from exc
            if ancestor == real_root:
                return Path(target)
            ancestor = os.path.dirname(ancestor)
            continue
        if not _within(real_root, real):
            raise VisualError("PATH_OUTSIDE_PROJECT", f"Symlink escapes the project: {rel}")
        tail = os.path.relpath(target, ancestor)
        return Path(real if tail == "." else os.path.join(real, tail))


def _within(root: str, path: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)
