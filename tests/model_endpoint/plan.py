"""What the scripted model says: plans of steps, and how a step becomes a tool call that the
requesting CLI offered.

A *plan* is the list of the model's turns in one conversation; turn ``n`` is answered with step
``n`` (``n`` = the assistant turns already in the request's history, so the server keeps no
per-conversation state and a CLI's retry of a turn gets the same answer). The last step repeats.
A script holds several plans; the one used is the last whose ``match`` text occurs in the
conversation (a rework round's brief carries the verification feedback, so a plan matching
"Feedback from the previous round" answers round 2 differently).

An edit step becomes a call of whichever edit tool the CLI offers (``Edit``/``replace``/``edit``
with old and new strings, a whole-file write, Codex's ``apply_patch``, or a shell command as a
last resort); a CLI that offers no tools (aider) gets the edit in the text format its system
prompt asks for (SEARCH/REPLACE blocks or a whole file listing).
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Edit:
    """Replace the one occurrence of ``old`` with ``new`` in ``path`` (absolute)."""

    path: str
    old: str
    new: str


@dataclass
class Say:
    """A final text answer (the agent's last message)."""

    text: str = "Done: the fix is in place and the tests pass."


@dataclass
class Hold:
    """Answer ``text`` only once the test calls :meth:`ModelEndpoint.release` (the agent is then
    mid-work for as long as the test needs: a screenshot, a query)."""

    text: str = "Done: the fix is in place and the tests pass."


Step = Edit | Say | Hold


@dataclass
class Plan:
    """The model's turns in a conversation whose text contains ``match`` ("" matches all)."""

    steps: list[Step]
    match: str = ""


@dataclass
class Script:
    """Everything the endpoint does for one test.

    Attributes:
        plans: conversation plans (see the module doc).
        fail: answer every model call with this HTTP status (401, 403, 429, 500) in the provider's
            own error shape; None for normal answers.
        hang: never answer a model call (the connection stays open until the client gives up).
        delay_s: wait this long before each answer, s.
        chunk_delay_s: pause between streamed chunks, s.
    """

    plans: list[Plan] = field(default_factory=list)
    fail: int | None = None
    hang: bool = False
    delay_s: float = 0.0
    chunk_delay_s: float = 0.0

    def step(self, conversation_text: str, turn: int) -> Step:
        """The step answering turn ``turn`` of the conversation whose whole text is given."""
        chosen = Plan([Say()])
        for plan in self.plans:
            if plan.match in conversation_text:
                chosen = plan
        if not chosen.steps:
            return Say()
        return chosen.steps[min(turn, len(chosen.steps) - 1)]


@dataclass
class Tool:
    """A tool the request offers: its name, JSON-schema properties and kind ("function" or
    Codex's freeform "custom")."""

    name: str
    properties: dict[str, Any]
    kind: str = "function"


@dataclass
class Call:
    """A tool call to answer with: the tool, its arguments (a dict, or the freeform input text of a
    custom tool)."""

    tool: Tool
    arguments: dict[str, Any] | str

    def arguments_json(self) -> str:
        return self.arguments if isinstance(self.arguments, str) else json.dumps(self.arguments)


_PATH_KEYS = ("file_path", "filePath", "absolute_path", "path", "filename", "file")
_OLD_KEYS = ("old_string", "oldString", "old_str", "old_text", "oldText", "search")
_NEW_KEYS = ("new_string", "newString", "new_str", "new_text", "newText", "replace")
_CONTENT_KEYS = ("content", "contents", "file_text", "text")
_SHELL_KEYS = ("command", "cmd")


def _key(props: dict[str, Any], names: tuple[str, ...]) -> str | None:
    for name in names:
        if name in props:
            return name
    return None


def _whole_lines(edit: Edit) -> tuple[str, str]:
    """``old``/``new`` widened to the whole lines of the file they sit on (apply_patch matches
    whole lines, ignoring surrounding whitespace, and writes the ``+`` lines as given, so a bare
    ``return a - b`` would lose its indentation)."""
    try:
        text = Path(edit.path).read_text(encoding="utf-8")
    except OSError:
        return edit.old, edit.new
    at = text.find(edit.old)
    if at < 0:
        return edit.old, edit.new
    start = text.rfind("\n", 0, at) + 1
    end = text.find("\n", at + len(edit.old))
    end = len(text) if end < 0 else end
    block = text[start:end]
    return block, block.replace(edit.old, edit.new, 1)


def _patch(edit: Edit) -> str:
    old, new = _whole_lines(edit)
    old_lines = old.splitlines()
    new_lines = new.splitlines()
    body = "\n".join([*(f"-{line}" for line in old_lines), *(f"+{line}" for line in new_lines)])
    return f"*** Begin Patch\n*** Update File: {edit.path}\n@@\n{body}\n*** End Patch\n"


def _shell_command(edit: Edit) -> str:
    program = ("import pathlib,sys;p=pathlib.Path(sys.argv[1]);t=p.read_text();"
               "p.write_text(t.replace(sys.argv[2],sys.argv[3],1))")
    return shlex.join(["python3", "-c", program, edit.path, edit.old, edit.new])


def edit_call(edit: Edit, tools: list[Tool]) -> Call | None:
    """The call of an offered tool that carries out ``edit``, or None when no tool can."""
    for tool in tools:  # a string-replacement edit tool
        props = tool.properties
        path, old, new = _key(props, _PATH_KEYS), _key(props, _OLD_KEYS), _key(props, _NEW_KEYS)
        if path and old and new and tool.kind == "function":
            return Call(tool, {path: edit.path, old: edit.old, new: edit.new})
    for tool in tools:  # Codex's patch tool
        if tool.name == "apply_patch":
            if tool.kind == "custom":
                return Call(tool, _patch(edit))
            key = _key(tool.properties, ("input", "patch")) or "input"
            return Call(tool, {key: _patch(edit)})
    for tool in tools:  # a whole-file write
        props = tool.properties
        path, content = _key(props, _PATH_KEYS), _key(props, _CONTENT_KEYS)
        if path and content and "write" in tool.name.lower():
            text = Path(edit.path).read_text(encoding="utf-8").replace(edit.old, edit.new, 1)
            return Call(tool, {path: edit.path, content: text})
    for tool in tools:  # a shell
        key = _key(tool.properties, _SHELL_KEYS)
        if key and any(word in tool.name.lower() for word in ("shell", "bash", "exec", "command")):
            schema = tool.properties[key]
            command: Any = _shell_command(edit)
            if isinstance(schema, dict) and schema.get("type") == "array":
                command = ["bash", "-lc", command]
            return Call(tool, {key: command})
    return None


def text_edit(edit: Edit, system_text: str) -> str:
    """The edit as text for a tool-less CLI (aider): SEARCH/REPLACE blocks, or a whole file
    listing when the system prompt asks for that format."""
    rel = edit.path
    if "SEARCH/REPLACE" in system_text or "<<<<<<< SEARCH" in system_text:
        return (f"I will fix it.\n\n{rel}\n```\n<<<<<<< SEARCH\n{edit.old}\n=======\n{edit.new}\n"
                f">>>>>>> REPLACE\n```\n")
    text = Path(edit.path).read_text(encoding="utf-8").replace(edit.old, edit.new, 1)
    return f"I will fix it.\n\n{rel}\n```\n{text}```\n"


def json_for_schema(schema: Any) -> Any:
    """A minimal value satisfying a JSON schema (a CLI's structured side call, e.g. Gemini's
    next-speaker check): the first enum value, empty strings, false, 0, required keys filled."""
    if not isinstance(schema, dict):
        return {}
    if schema.get("enum"):
        return schema["enum"][0]
    kind = str(schema.get("type", "object")).lower()
    if kind == "object":
        props = schema.get("properties") or {}
        return {name: json_for_schema(sub) for name, sub in props.items()}
    if kind == "array":
        return []
    if kind in ("integer", "number"):
        return 0
    if kind == "boolean":
        return False
    return "done"
