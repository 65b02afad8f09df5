"""Agent profile registry: ``agent-profiles.json``, built-ins, resolution (docs/agents-tasks.md §1.6–§1.8).

A *profile* is data, not code: it says how to start an agent (``command`` + ``argsTemplate``), how
the prompt reaches it (``promptMode``), where it runs (``cwd``) and for how long (``timeoutMs``).

* :func:`load_profiles` merges the built-ins with ``<home>/agent-profiles.json``
  (``{"profiles": {<agentId>: AgentProfile}}``); a user entry **replaces the whole built-in entry**
  (no deep merge). The file is re-read on every call, so edits apply without a restart.
* :func:`resolve_agent` turns an agent id into a :class:`ResolvedAgent`: the absolute executable to
  start, or ``ok=False`` with a human message saying why it cannot run.
* :func:`list_agents` resolves every known profile (for ``query_info``).

Simplifications against the original (documented, deliberate): a desktop (``gui``) profile's
``command`` is its app's executable, resolved like a CLI's; an empty ``command`` is looked up
on ``PATH`` through ``executableDiscovery.fallbackCommand`` / ``fileNames`` first, and only then
are ``executableDiscovery.dirs`` scanned (the original scans first; empty ``dirs`` scan nothing
instead of the platform defaults); ``research`` profiles are never ``ok`` (the original allows
them only via the directory scan).
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ..core.errors import ErrorCode, TianshuError
from ..core.i18n import _
from ..core.settings import MAX_TIMEOUT_MS
from .acp.policy import AcpSettings
from .builtin_acp import acp_builtin_data
from .builtin_cli import cli_builtin_data
from .builtin_gui import gui_builtin_data
from .cli_facts import AuthSource, LivenessSettings, check_cli_facts
from .discovery import discover_executable, expand_discovery_dir  # noqa: F401 - expand_discovery_dir re-exported
from .gui_keys import gui_problems

PROFILES_FILE = "agent-profiles.json"
"""File name of the user profile file inside the data home."""

DEFAULT_AGENT_TIMEOUT_MS = 1_800_000
"""Default ``timeoutMs`` of a profile: 30 min (docs/agents-tasks.md §1.6)."""

GuiAdapterName = Literal[
    "traework-gui",
    "zcode-gui",
    "codex-gui",
    "kimicode-gui",
    "qoder-gui",
    "opendesign-gui",
    "minimax-gui",
]


class AgentProfile(BaseModel):
    """One entry of ``agent-profiles.json`` (docs/agents-tasks.md §1.6).

    JSON keys are camelCase (``displayName``, ``argsTemplate``, ``promptMode``, ``timeoutMs``,
    ``authNote``); Python attributes are snake_case. Unknown keys (``gui``, ``killTree``,
    ``executableDiscovery``, ``opendesign`` …) are kept verbatim in ``model_extra`` so GUI fields
    survive a round trip; dump with ``model_dump(by_alias=True, exclude_none=True)``.

    Validation is strict (no silent coercion: ``"timeoutMs": "5"`` or ``"env": {"A": 1}`` is
    rejected).

    Fields (default):
        display_name (``displayName``, ""), type ("cli", the only value), driver ("spawn"|"gui"),
        adapter (GUI adapter name or None), status ("ready"|"research"|"unsupported"),
        command (str or None: executable name or path; ``<…>`` is a placeholder),
        args_template (``argsTemplate``, []: argv after the command, with the placeholders
        ``<prompt:arg>``, ``<prompt:file>``, ``<prompt:stdin>``), prompt_mode
        (``promptMode``, "arg"|"stdin"|"file"), cwd ("task": the project, "home": the user's
        home), env ({}: overlaid on the server's environment), timeout_ms (``timeoutMs``,
        None, > 0: the agent's wall-clock limit per round, ms; None leaves it to
        ``config.json``'s ``defaultTaskTimeoutMs``, docs/agents-tasks.md §2.3), auth_note (``authNote``, ""),
        fatal_patterns (``fatalPatterns``, []: regular expressions of output lines that mean the agent could
        not work, added to :data:`tianshu_mcp.adapters.fatal.DEFAULT_FATAL_PATTERNS`), confirmation_patterns /
        authorization_patterns (``confirmationPatterns`` / ``authorizationPatterns``, []: output
        lines that mean the agent waits for a confirmation / for a login, added to those of
        :mod:`tianshu_mcp.adapters.prompts`), note (None), version_args (``versionArgs``, None:
        how to ask the executable its version for ``query_info``; None → ``["--version"]``,
        ``[]`` → not asked), output_format (``outputFormat``, None: plain text; else a reader of
        :data:`~tianshu_mcp.adapters.output.formats.READERS`, docs/real-agents.md §3), owned_paths
        (``ownedPaths``, []: globs of untracked files the CLI keeps for itself in the project,
        e.g. ``.aider*``: never the agent's change), root_env (``rootEnv``, {}: overlaid on
        ``env`` when the server runs as root), exit_codes (``exitCodes``, {}: what an exit code
        of the CLI means, quoted in the task's message), liveness (:class:`LivenessSettings`),
        tested_versions (``testedVersions``, None: the version range the profile was run with,
        a PEP 440 specifier such as ``>=0.171,<0.200``; ``agents doctor`` compares),
        node_versions (``nodeVersions``, None: the Node.js versions the CLI needs, a PEP 440
        specifier such as ``>=22``; only for CLIs that run on Node), auth_sources
        (``authSources``, []: where the CLI finds its credentials, in the order it looks:
        :class:`AuthSource`; ``agents doctor`` says which one it will use), help_args
        (``helpArgs``, None: how to ask the executable its help for ``agents doctor``'s flag
        check; None → ``[<subcommand>] --help``, ``[]`` → not asked). A custom command is never
        probed with the defaults: only what it sets in ``versionArgs`` / ``helpArgs`` is run
        (:func:`tianshu_mcp.adapters.doctor.probe_plan`).
    """

    model_config = ConfigDict(extra="allow", populate_by_name=True, strict=True)

    display_name: str = Field("", alias="displayName")
    type: Literal["cli"] = "cli"
    driver: Literal["spawn", "acp", "gui"] = "spawn"
    adapter: GuiAdapterName | None = None
    status: Literal["ready", "research", "unsupported"] = "ready"
    command: str | None = None
    args_template: list[str] = Field(default_factory=list, alias="argsTemplate")
    prompt_mode: Literal["arg", "stdin", "file"] = Field("arg", alias="promptMode")
    cwd: Literal["task", "home"] = "task"
    env: dict[str, str] = Field(default_factory=dict)
    timeout_ms: int | None = Field(None, gt=0, le=MAX_TIMEOUT_MS, alias="timeoutMs")
    auth_note: str = Field("", alias="authNote")
    fatal_patterns: list[str] = Field(default_factory=list, alias="fatalPatterns")
    confirmation_patterns: list[str] = Field(default_factory=list, alias="confirmationPatterns")
    authorization_patterns: list[str] = Field(default_factory=list, alias="authorizationPatterns")
    note: str | None = None
    version_args: list[str] | None = Field(None, alias="versionArgs")
    output_format: str | None = Field(None, alias="outputFormat")
    owned_paths: list[str] = Field(default_factory=list, alias="ownedPaths")
    root_env: dict[str, str] = Field(default_factory=dict, alias="rootEnv")
    exit_codes: dict[str, str] = Field(default_factory=dict, alias="exitCodes")
    liveness: LivenessSettings = Field(default_factory=LivenessSettings)
    tested_versions: str | None = Field(None, alias="testedVersions")
    node_versions: str | None = Field(None, alias="nodeVersions")
    auth_sources: list[AuthSource] = Field(default_factory=list, alias="authSources")
    help_args: list[str] | None = Field(None, alias="helpArgs")

    @model_validator(mode="after")
    def _cli_facts_valid(self) -> AgentProfile:
        check_cli_facts(self.output_format, self.exit_codes, self.owned_paths,
                        {"testedVersions": self.tested_versions, "nodeVersions": self.node_versions})
        return self

    @model_validator(mode="after")
    def _fatal_patterns_compile(self) -> AgentProfile:
        import re

        for name, patterns in (("fatalPatterns", self.fatal_patterns), ("confirmationPatterns", self.confirmation_patterns),
                               ("authorizationPatterns", self.authorization_patterns)):
            for pattern in patterns:
                try:
                    re.compile(pattern)
                except re.error as exc:
                    raise ValueError(_("{name}: {pattern} is not a regular expression ({error})").format(
                        name=name, pattern=repr(pattern), error=exc)) from exc
        return self

    @model_validator(mode="after")
    def _prompt_reaches_the_agent(self) -> AgentProfile:
        # port: a CLI profile whose argsTemplate has no place for the brief would run the agent
        # with an empty prompt and no warning; refuse it at load time instead
        if self.driver == "spawn" and self.command:
            needed = {"arg": "<prompt:arg>", "file": "<prompt:file>"}.get(self.prompt_mode)
            if needed and not any(needed in item for item in self.args_template):
                raise ValueError(_("promptMode '{mode}' needs {needed} in argsTemplate (otherwise the agent never "
                                   "receives the brief)").format(mode=self.prompt_mode, needed=needed))
        return self

    @model_validator(mode="after")
    def _driver_settings_valid(self) -> AgentProfile:
        extra = self.model_extra or {}
        for key in ("acp", "gui"):
            if key in extra and self.driver != key:
                raise ValueError(_("'{key}' settings apply to \"driver\": \"{key}\" only (this profile's driver is "
                                   "'{driver}'); add \"driver\": \"{key}\" or remove them").format(key=key, driver=self.driver))
        if self.driver == "acp" and extra.get("acp") is not None:
            AcpSettings.model_validate(extra["acp"])  # ValidationError names the field
        if self.driver == "gui" and "gui" in extra:
            problems = gui_problems(extra["gui"])
            if problems:
                raise ValueError("; ".join(problems))
        return self

    @property
    def effective_adapter(self) -> str | None:
        """The GUI adapter this profile asks for: ``adapter``, or ``traework-gui`` for a GUI
        driver without one (docs/agents-tasks.md §1.6); None for a spawn (CLI) profile."""
        if self.adapter:
            return self.adapter
        return "traework-gui" if self.driver == "gui" else None

    def to_json(self) -> dict[str, Any]:
        """The profile as it is written in ``agent-profiles.json`` (camelCase, None omitted, and the
        facts of docs/real-agents.md left out while they hold their defaults)."""
        raw = self.model_dump(by_alias=True, exclude_none=True)
        for key in ("ownedPaths", "rootEnv", "exitCodes", "authSources"):
            if not raw.get(key):
                raw.pop(key, None)
        if self.liveness == LivenessSettings():
            raw.pop("liveness", None)
        return raw


def _builtin_data() -> dict[str, dict[str, Any]]:
    """Raw built-in profiles (docs/agents-tasks.md §1.7), as they would appear in the JSON file."""
    return {**cli_builtin_data(), **acp_builtin_data(), **gui_builtin_data()}


def builtin_profiles() -> dict[str, AgentProfile]:
    """Return fresh copies of the built-in profiles, keyed by agent id (docs/agents-tasks.md §1.7).

    CLI agents (docs/agent-adapters.md, driver spawn, status ready, found on PATH or in their discovery dirs):
    ``codex`` (``codex exec --skip-git-repo-check --sandbox workspace-write -- <prompt>``),
    ``claude`` (``claude -p --permission-mode acceptEdits --output-format text -- <prompt>``),
    ``gemini`` (``gemini --approval-mode auto_edit --skip-trust --prompt=<prompt>``), ``aider``
    (``aider --yes-always --no-auto-commits --no-check-update --no-show-release-notes
    --no-analytics --message-file <prompt file>``), ``opencode`` (``opencode run``, prompt on
    stdin), ``qwen`` (``qwen --approval-mode auto-edit --prompt=<prompt>``); the ACP agents of
    :mod:`.builtin_acp`; codex-desktop, zcode, traework, kimicode, qoder, opendesign and minimax
    are desktop (``gui``) profiles marked ``research`` on this OS (:mod:`.builtin_gui`: listed
    with the reason, not runnable).
    """
    return {agent_id: AgentProfile.model_validate(raw) for agent_id, raw in _builtin_data().items()}


def _describe_validation(path: Path, agent_id: str, exc: ValidationError) -> str:
    import re

    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err.get("loc", ()))
        where = _("field '{field}'").format(field=loc) if loc else _("entry")
        msg = str(err.get("msg", "invalid")).removeprefix("Value error, ")  # pydantic's wording, not ours
        msg = re.sub(r" or instance of \w+", "", msg)
        parts.append(f"{where}: {msg}")
    return _("{path}: profile '{agentId}' is invalid: {details}").format(path=path, agentId=agent_id,
                                                                         details=_("; ").join(parts))


def _user_entries(path: Path) -> dict[str, Any]:
    """The raw entries of ``agent-profiles.json`` at ``path`` (``{}`` when there is no file),
    not validated yet (:func:`load_registry`).

    Raises:
        TianshuError(CONFIG_UNREADABLE | CONFIG_INVALID): as :func:`load_registry`.
    """
    try:
        raw_bytes = path.read_bytes()
    except FileNotFoundError:
        return {}
    except OSError as exc:  # IsADirectoryError, PermissionError, …
        raise TianshuError(ErrorCode.CONFIG_UNREADABLE, _("{path}: cannot read agent profiles ({error})").format(
            path=path, error=exc.strerror or exc)) from exc
    try:
        data = json.loads(raw_bytes.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise TianshuError(ErrorCode.CONFIG_INVALID, _("{path}: not valid UTF-8 ({reason})").format(
            path=path, reason=exc.reason)) from exc
    except json.JSONDecodeError as exc:
        raise TianshuError(ErrorCode.CONFIG_INVALID, _("{path}: invalid JSON at line {line} column {column}: {error}")
                           .format(path=path, line=exc.lineno, column=exc.colno, error=exc.msg)) from exc
    if not isinstance(data, dict):
        raise TianshuError(ErrorCode.CONFIG_INVALID, _("{path}: the top level must be an object {shape}").format(
            path=path, shape='{"profiles": {...}}'))
    user = data.get("profiles", {})
    if not isinstance(user, dict):
        raise TianshuError(ErrorCode.CONFIG_INVALID, _("{path}: 'profiles' must be an object mapping agent ids to "
                                                       "profiles, got {type}").format(path=path, type=type(user).__name__))
    for agent_id in user:
        if not agent_id.strip():
            raise TianshuError(ErrorCode.CONFIG_INVALID, _("{path}: a profile has an empty agent id").format(path=path))
    return user


def load_registry(home: Path) -> tuple[dict[str, AgentProfile], dict[str, str]]:
    """Every profile: the built-ins, then ``<home>/agent-profiles.json`` on top, and the user
    entries that do not validate.

    Each user entry replaces the whole built-in entry of the same id (no deep merge,
    docs/agents-tasks.md §1.6). The file is optional; it is re-read on every call. One broken entry
    does not take the others down: it is returned in the second dict (and its id is removed
    from the first, so a broken override never falls back to the built-in silently).

    Args:
        home: the data home (``TIANSHU_MCP_HOME``).

    Returns:
        ``({agentId: AgentProfile}, {agentId: message})``: valid profiles (built-in ids first,
        then user-only ids in file order) and, per broken entry, a message naming the file, the
        agent id and each offending field.

    Raises:
        TianshuError(CONFIG_UNREADABLE): the file exists but cannot be read (a directory, no
            permission).
        TianshuError(CONFIG_INVALID): invalid UTF-8/JSON, the top level or ``profiles`` is not an
            object, or an empty agent id (the file as a whole cannot be read).
    """
    profiles = builtin_profiles()
    broken: dict[str, str] = {}
    path = Path(home) / PROFILES_FILE
    for agent_id, raw in _user_entries(path).items():
        try:
            profiles[agent_id] = AgentProfile.model_validate(raw)
        except ValidationError as exc:
            profiles.pop(agent_id, None)
            broken[agent_id] = _describe_validation(path, agent_id, exc)
    return profiles, broken


def load_profiles(home: Path) -> dict[str, AgentProfile]:
    """The valid profiles of :func:`load_registry` (broken user entries left out).

    Raises:
        TianshuError(CONFIG_INVALID | CONFIG_UNREADABLE): the file as a whole cannot be read.
    """
    return load_registry(home)[0]


@dataclass
class ResolvedAgent:
    """An agent id resolved against its profile (docs/agents-tasks.md §1.8).

    Attributes:
        id: the agent id.
        display_name: ``profile.displayName`` or the id.
        profile: the profile, or None when the id is not configured.
        command: absolute path of the executable to start, or None when not runnable.
        ok: True when the agent can be started by this build.
        message: human text: where the command was found, or why the agent cannot run.
        source: "explicit" (the profile's command is an existing path), "path" (found on PATH),
            "discovery" (found by the ``executableDiscovery.dirs`` scan), or None when not ok.
    """

    id: str
    display_name: str
    profile: AgentProfile | None
    command: str | None
    ok: bool
    message: str
    source: Literal["explicit", "path", "discovery"] | None = None

    def to_info(self, version: str | None = None) -> dict[str, Any]:
        """Summary for ``query_info``: ``{id, displayName, driver, status, ok, message, command,
        source, version}`` (driver/status None for an unknown id, command/source None when not
        ok; ``version``: what the executable reports, see :mod:`.versions`)."""
        return {
            "id": self.id,
            "displayName": self.display_name,
            "driver": self.profile.driver if self.profile else None,
            "status": self.profile.status if self.profile else None,
            "ok": self.ok,
            "message": self.message,
            "command": self.command,
            "source": self.source,
            "version": version,
        }


def _not_ok(agent_id: str, profile: AgentProfile | None, message: str) -> ResolvedAgent:
    name = (profile.display_name if profile else "") or agent_id
    return ResolvedAgent(agent_id, name, profile, None, False, message)


def _looks_like_path(command: str) -> bool:
    return os.sep in command or (os.altsep is not None and os.altsep in command) or command.startswith("~")


def resolve_profile(agent_id: str, profile: AgentProfile | None) -> ResolvedAgent:
    """Resolve one profile (already loaded) to a runnable command; see :func:`resolve_agent`."""
    if profile is None:
        return _not_ok(agent_id, None, _("agent '{agentId}' is not configured; add a profile to {file}").format(
            agentId=agent_id, file=PROFILES_FILE))
    if profile.status == "unsupported":
        detail = profile.note or _("marked unsupported")
        return _not_ok(agent_id, profile, _("agent '{agentId}' is unsupported: {detail}").format(agentId=agent_id,
                                                                                                 detail=detail))
    if profile.status == "research":
        return _not_ok(
            agent_id,
            profile,
            (_("agent '{agentId}' is marked research and is not runnable in this build ({note}); set \"status\": "
               "\"ready\" to try it") if profile.note else
             _("agent '{agentId}' is marked research and is not runnable in this build; set \"status\": \"ready\" to "
               "try it")).format(agentId=agent_id, note=profile.note),
        )
    command = (profile.command or "").strip()
    candidates: list[str]
    if command:
        if command.startswith("<"):
            return _not_ok(
                agent_id,
                profile,
                _("agent '{agentId}' has a placeholder command '{command}'; set the executable in {file}").format(
                    agentId=agent_id, command=command, file=PROFILES_FILE),
            )
        candidates = [command]
    else:
        disc = (profile.model_extra or {}).get("executableDiscovery")
        candidates = []
        if isinstance(disc, dict):
            fallback = disc.get("fallbackCommand")
            if isinstance(fallback, str) and fallback.strip():
                candidates.append(fallback.strip())
            names = disc.get("fileNames")
            if isinstance(names, list):
                candidates.extend(n for n in names if isinstance(n, str) and n.strip() and n not in candidates)
        if not candidates:
            return _not_ok(agent_id, profile, _("agent '{agentId}' has no command; set \"command\" in {file}").format(
                agentId=agent_id, file=PROFILES_FILE))

    name = profile.display_name or agent_id
    for cand in candidates:
        if _looks_like_path(cand) or os.path.isabs(cand):
            path = Path(cand).expanduser()
            if path.is_file():
                return ResolvedAgent(agent_id, name, profile, os.path.abspath(path), True,
                                     _("command {path}").format(path=os.path.abspath(path)), "explicit")
            continue
        found = shutil.which(cand)
        if found:
            found = os.path.abspath(found)
            return ResolvedAgent(agent_id, name, profile, found, True, _("command {path} (found on PATH)").format(path=found),
                                 "path")
    disc = (profile.model_extra or {}).get("executableDiscovery")
    if isinstance(disc, dict) and isinstance(disc.get("dirs"), list) and isinstance(disc.get("fileNames"), list):
        found = discover_executable(disc["dirs"], disc["fileNames"])
        if found:
            return ResolvedAgent(agent_id, name, profile, found, True,
                                 _("command {path} (found by discovery)").format(path=found), "discovery")
    first = candidates[0]
    if _looks_like_path(first) or os.path.isabs(first):
        return _not_ok(agent_id, profile, _("command '{command}' does not exist").format(command=first))
    others = "".join(_(" (or '{command}')").format(command=c) for c in candidates[1:])
    return _not_ok(agent_id, profile, _("command '{command}'{others} not found on PATH").format(command=first,
                                                                                                others=others))


def resolve_agent(agent_id: str, home: Path) -> ResolvedAgent:
    """Resolve ``agent_id`` to an executable (docs/agents-tasks.md §1.8, simplified).

    Order: unknown id → not ok (``agent '<id>' is not configured; add a profile to
    agent-profiles.json``); status unsupported → not ok (the note); status research → not ok
    (with the note); command ``<…>`` → placeholder, not ok; command an existing file path →
    ``explicit``; otherwise ``shutil.which`` on the server's PATH → ``path``; otherwise not ok
    (``command '<c>' not found on PATH``). An empty command tries
    ``executableDiscovery.fallbackCommand`` then ``fileNames`` on PATH. When none is found there
    and the profile has ``executableDiscovery.dirs`` and ``fileNames``, those directories are
    scanned (:func:`discover_executable`, newest mtime wins) → ``discovery``. PATH comes first
    (deliberate, against the spec's discovery-first order): it is what the user's shell runs;
    the scan finds CLIs a GUI-launched host's short PATH misses. Profiles are re-read on every
    call (no cache).

    Raises:
        TianshuError(CONFIG_INVALID | CONFIG_UNREADABLE): the file cannot be read, or
            ``agent_id``'s own entry is invalid (the message names the field); another agent's
            broken entry does not matter.
    """
    path = Path(home) / PROFILES_FILE
    user = _user_entries(path)  # only this id's profile is validated (all of them cost ≈1.5 ms a call)
    if agent_id in user:
        try:
            profile: AgentProfile | None = AgentProfile.model_validate(user[agent_id])
        except ValidationError as exc:
            raise TianshuError(ErrorCode.CONFIG_INVALID, _describe_validation(path, agent_id, exc)) from exc
    else:
        raw = _builtin_data().get(agent_id)
        profile = AgentProfile.model_validate(raw) if raw is not None else None
    return resolve_profile(agent_id, profile)


def list_agents(home: Path) -> list[ResolvedAgent]:
    """Resolve every profile (built-ins first, then user-only ids) for ``query_info``; a broken
    user entry is a row that is not ok, its message naming the field.

    Raises:
        TianshuError(CONFIG_INVALID | CONFIG_UNREADABLE): the file as a whole cannot be read.
    """
    profiles, broken = load_registry(home)
    rows = [resolve_profile(agent_id, profile) for agent_id, profile in profiles.items()]
    return rows + [_not_ok(agent_id, None, message) for agent_id, message in broken.items()]


def describe_agent(agent: ResolvedAgent) -> dict[str, Any]:
    """:meth:`ResolvedAgent.to_info` with the facts of ``agents doctor`` (version against
    ``testedVersions``, flags, Node.js, credentials, problems: :func:`.doctor.diagnose`). Only a
    built-in CLI/ACP executable, or a profile that sets ``versionArgs`` / ``helpArgs``, is
    started for them (a custom script could take ``--version`` for a brief); a desktop app never.
    Never raises."""
    from .doctor import diagnose

    return diagnose(agent).to_json()
