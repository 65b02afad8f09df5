"""The user's answers to what an agent asked to be allowed, per task (an ACP permission, a
desktop app's confirmation card).

When a round ends ``needs_user`` (``user_confirmation``), the driver records what it asked
(:meth:`Answers.ask`); the re-run round applies the user's answer (:meth:`Answers.settle`) and,
from then on, the same request is answered the same way without asking again
(:meth:`Answers.decided`) — in that round and in rework rounds. Kept in
``<taskDir>/<file>`` as ``{"pending": {round: {key, question}}, "decided": {key: bool}}``.
Plain Python: no Prefect, no acceptance import.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

_YES = re.compile(r"^\s*(y|yes|ok|okay|allow|approve|approved|go ahead|sure|是|好|可以|同意|允许|确认)\b", re.IGNORECASE)


def affirmative(answer: str) -> bool:
    """True when the user's answer allows the request ("yes", "allow", "好", "同意" …)."""
    return bool(_YES.match(answer or "")) or (answer or "").strip() in {"是", "好", "可以", "同意", "允许", "确认"}


class Answers:
    """The user's answers to one task's requests, in ``<task_dir>/<file_name>`` (see the module doc)."""

    def __init__(self, task_dir: Path, file_name: str) -> None:
        self.path = Path(task_dir) / file_name

    def _read(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {"pending": {}, "decided": {}}
        return data if isinstance(data, dict) else {"pending": {}, "decided": {}}

    def _write(self, data: dict[str, Any]) -> None:
        from ..core.files import atomic_write_json

        atomic_write_json(self.path, data)

    def decided(self, key: str) -> bool | None:
        """The user's earlier answer to the request ``key``, or None."""
        value = self._read().get("decided", {}).get(key)
        return value if isinstance(value, bool) else None

    def ask(self, rnd: int, key: str, question: str) -> None:
        """Remember that round ``rnd`` asked the user ``question`` about the request ``key``."""
        data = self._read()
        data.setdefault("pending", {})[str(rnd)] = {"key": key, "question": question}
        self._write(data)

    def settle(self, rnd: int, answer: str | None) -> None:
        """Apply the answer given to round ``rnd``'s question (if it asked one)."""
        data = self._read()
        pending = data.get("pending", {}).pop(str(rnd), None)
        if pending is None or answer is None:
            return
        data.setdefault("decided", {})[pending["key"]] = affirmative(answer)
        self._write(data)
