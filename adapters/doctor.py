"""``agents doctor``: what each agent profile will meet when a task runs it (docs/real-agents.md §5).

For every profile (the built-ins and ``<home>/agent-profiles.json``) :func:`diagnose` reports:

1. the executable (:func:`~.profiles.resolve_profile`) or why there is none;
2. its version (``--version``) against ``testedVersions``: ``tested``, ``newer than tested``,
   ``older than tested`` or ``unknown`` (``not probed`` for a custom command, see below);
3. each flag of its command line (:func:`profile_flags`) present in its ``--help``
   (``<exe> <subcommand> --help`` when the command line starts with a subcommand such as
   ``exec``): a missing flag is a problem before a task fails on it;
4. the Node.js that runs it against ``nodeVersions`` (a ``#!/usr/bin/env node`` script: the
   ``node`` on the agent's PATH; an npm shell shim: the ``node`` next to it, else on PATH; a
   native binary: not applicable);
5. the credentials it will use: the first ``authSources`` entry whose variable is set (its name
   only, never the value) or whose file exists; none found is a note, not a problem (a CLI may
   keep credentials where no profile can list them, such as a custom provider's key variable);
6. ACP profiles the same; desktop (``gui``) profiles only the resolution (an app is never started).

Safety: a probe runs the executable, so only a command known to be a CLI is probed
(:func:`probe_plan`): a profile that runs the built-in's executable (whatever its command line),
or one that sets ``versionArgs`` (for the version) / ``helpArgs`` (for the flags). A custom
command (say ``python3 my_agent.py <prompt:arg>``, or a script that takes its argv for the
brief) is never started with ``--version`` or ``--help``. Probes are bounded and cached
(:func:`~.versions.run_probe`). Plain Python: no Prefect, no acceptance import.
"""

from __future__ import annotations

import os
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from . import versions
from .doctor_checks import (
    AuthReport,
    NodeReport,
    VersionStatus,
    check_auth,
    check_node,
    compare_version,
)
from .profiles import AgentProfile, ResolvedAgent, builtin_profiles, list_agents

__all__ = ["AgentDiagnosis", "AuthReport", "FlagReport", "NodeReport", "ProbePlan", "check_auth", "check_flags",
           "check_node", "compare_version", "diagnose", "diagnose_agents", "diagnose_home", "exit_code",
           "probe_plan", "profile_flags", "script_runner", "subcommand"]

State = Literal["ok", "problem", "not installed", "not runnable", "broken"]

PROBE_WORKERS = max(2, min(8, os.cpu_count() or 2))
"""How many profiles :func:`diagnose_agents` probes at once (one per CPU, 2 to 8: a Node CLI's
``--version`` takes seconds of CPU, and eight at once on two cores ran past their timeout)."""

_INTERPRETER = re.compile(r"^(python[\d.]*|pypy[\d.]*|node(js)?|deno|bun|tsx|ts-node|bash|sh|dash|zsh|fish|ksh|"
                          r"ruby|perl|php|lua|java|uvx?|npx|pnpx|npm|pnpm|yarn|env|pwsh|powershell|osascript)"
                          r"(\.exe)?$", re.IGNORECASE)


class FlagReport(BaseModel):
    """The command line's flags against the CLI's help text.

    Attributes:
        present / missing: the flags (:func:`profile_flags`) found / not found in the help.
        checked: True when a help text was read and compared.
        help_command (``helpCommand``): the probe that printed it, e.g. ``codex exec --help``.
        note: why nothing was checked (not probed, no flags, the help timed out …), or None.
    """

    present: list[str] = Field(default_factory=list)
    missing: list[str] = Field(default_factory=list)
    checked: bool = False
    help_command: str | None = Field(default=None, serialization_alias="helpCommand")
    note: str | None = None


class AgentDiagnosis(BaseModel):
    """One profile's doctor result; :meth:`to_json` is its machine form (stable camelCase keys).

    Attributes:
        id, display_name, driver, status (the profile's ``status``), ok, message, command,
        source: as :meth:`~.profiles.ResolvedAgent.to_info`.
        state: ``ok``, ``problem`` (found, with problems), ``not installed`` (a ready profile
            whose executable is absent: not a problem), ``not runnable`` (research, unsupported,
            a placeholder command) or ``broken`` (the user's entry does not validate: a problem).
        version: what ``--version`` printed, or None; version_status (``versionStatus``) and
            tested_versions (``testedVersions``): the comparison and its range.
        probed: True when the executable itself was started (version or help).
        flags, node (None without ``nodeVersions``), auth (None without ``authSources``): see
            their models. problems: what will make a task fail (the exit code counts them);
            notes: what is worth knowing but not a failure (not probed, newer than tested …).
    """

    id: str
    display_name: str = Field(serialization_alias="displayName")
    driver: str | None
    status: str | None
    ok: bool
    message: str
    command: str | None
    source: str | None
    state: State
    version: str | None = None
    version_status: VersionStatus = Field(default="unknown", serialization_alias="versionStatus")
    tested_versions: str | None = Field(default=None, serialization_alias="testedVersions")
    probed: bool = False
    flags: FlagReport = Field(default_factory=lambda: FlagReport())
    node: NodeReport | None = None
    auth: AuthReport | None = None
    problems: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """The result as JSON data (camelCase keys, every key present, None kept)."""
        return self.model_dump(by_alias=True)


@dataclass(frozen=True)
class ProbePlan:
    """What may be run to probe a profile's executable.

    Attributes:
        version_args: arguments asking the version (``["--version"]``), ``[]`` (not asked), or
            None (not probed: a custom command).
        help_args: arguments printing the help (``["exec", "--help"]``), ``[]`` or None likewise.
        custom: why the defaults do not apply (``custom command``, ``runs a script through
            python3``, ``desktop app``), or None for a built-in command line.
    """

    version_args: list[str] | None
    help_args: list[str] | None
    custom: str | None


def profile_flags(args_template: list[str]) -> list[str]:
    """The flags of a command line, in order, each once: the items starting with ``-``, cut at
    ``=`` (``--prompt=<prompt:arg>`` → ``--prompt``). The ``--`` separator, placeholders
    (``<prompt:arg>``) and flag values are not flags."""
    flags: list[str] = []
    for item in args_template:
        if not item.startswith("-") or item in ("-", "--") or item.startswith("<"):
            continue
        flag = item.split("=", 1)[0]
        if "<" in flag or flag in flags:
            continue
        flags.append(flag)
    return flags


def subcommand(args_template: list[str]) -> str | None:
    """The command line's subcommand (``exec`` of ``codex exec …``, ``run`` of ``opencode run``):
    its first item when that is neither a flag nor a placeholder; else None."""
    if args_template and not args_template[0].startswith("-") and "<" not in args_template[0]:
        return args_template[0]
    return None


def script_runner(profile: AgentProfile) -> str | None:
    """The interpreter's name when the profile runs a script through one (``python3
    my_agent.py <prompt:arg>``): its command is an interpreter (python, node, bash …) or an item
    before the first placeholder is a script path. None otherwise."""
    command = os.path.basename((profile.command or "").strip())
    if command and _INTERPRETER.match(command):
        return command
    for item in profile.args_template:
        if "<" in item:
            break
        if not item.startswith("-") and (os.sep in item or re.search(r"\.(py|js|mjs|cjs|ts|sh|rb|pl|php)$", item)):
            return command or "an interpreter"
    return None


def _same_executable(profile: AgentProfile, builtin: AgentProfile | None) -> bool:
    if builtin is None:
        return False
    # the built-in's executable, whatever command line the user gave it: probing it is safe, and an
    # edited command line is where a flag the CLI lacks comes from
    return (profile.driver == builtin.driver and profile.command == builtin.command
            and (profile.model_extra or {}).get("executableDiscovery") == (builtin.model_extra or {}).get("executableDiscovery"))


def probe_plan(agent_id: str, profile: AgentProfile, builtins: dict[str, AgentProfile] | None = None) -> ProbePlan:
    """Decide what may be run to probe ``profile`` (the safety rule of the module doc).

    A profile that runs its built-in's executable (the same ``command`` and discovery; a user entry
    may change anything else, its command line included) gets ``versionArgs`` or ``--version`` and
    ``helpArgs`` or ``[<subcommand>] --help``. Any other profile gets only what it sets
    explicitly; nothing for a desktop (``gui``) profile.

    Args:
        agent_id: the profile's id.
        profile: the profile.
        builtins: :func:`~.profiles.builtin_profiles` (computed when None).
    """
    if profile.driver == "gui":
        return ProbePlan(None, None, "desktop app")
    builtins = builtin_profiles() if builtins is None else builtins
    if _same_executable(profile, builtins.get(agent_id)):
        sub = subcommand(profile.args_template)
        default_help = [sub, "--help"] if sub else ["--help"]
        return ProbePlan(["--version"] if profile.version_args is None else profile.version_args,
                         default_help if profile.help_args is None else profile.help_args, None)
    runner = script_runner(profile)
    return ProbePlan(profile.version_args, profile.help_args,
                     f"runs a script through {runner}" if runner else "custom command")


def _display(executable: str, args: list[str]) -> str:
    return " ".join([os.path.basename(executable), *args])


def check_flags(executable: str, profile: AgentProfile, help_args: list[str] | None,
                custom: str | None = None) -> FlagReport:
    """Look each flag of the profile's command line up in ``executable help_args``' output.

    A flag counts as present when it appears as a whole word (``--sandbox`` is not found inside
    ``--sandbox-image``); ``--no-x`` also matches ``--[no-]x``. ``help_args`` None or ``[]``:
    not checked (``custom``: why the default help is not run, see :class:`ProbePlan`).
    """
    flags = profile_flags(profile.args_template)
    if not flags:
        return FlagReport(note="no flags in argsTemplate")
    if help_args is None:
        return FlagReport(note=f"not checked ({custom or 'custom command'}; set helpArgs to check)")
    if not help_args:
        return FlagReport(note="not checked (helpArgs is [])")
    shown = _display(executable, help_args)
    probe = versions.agent_help(executable, help_args)
    if probe is None:
        return FlagReport(help_command=shown, note=f"not checked ({shown} could not be started)")
    if probe.timed_out:
        return FlagReport(help_command=shown,
                          note=f"not checked ({shown} did not finish within {versions.HELP_TIMEOUT_S:g} s; killed)")
    if not probe.output.strip():
        return FlagReport(help_command=shown, note=f"not checked ({shown} printed nothing)")
    present: list[str] = []
    missing: list[str] = []
    for flag in flags:
        forms = [flag]
        if flag.startswith("--no-"):
            forms.append("--[no-]" + flag.removeprefix("--no-"))
        found = any(re.search(r"(?<![\w-])" + re.escape(form) + r"(?![\w-])", probe.output) for form in forms)
        (present if found else missing).append(flag)
    if not present and probe.exit_code:  # an error, not a help text (env: 'node': No such file …)
        first = probe.output.strip().splitlines()[0][:200]
        return FlagReport(help_command=shown, note=f"not checked ({shown} failed with exit code {probe.exit_code}: {first})")
    return FlagReport(present=present, missing=missing, checked=True, help_command=shown)


def _state(agent: ResolvedAgent) -> State:
    profile = agent.profile
    if profile is None:
        return "broken"
    if agent.ok:
        return "ok"
    if profile.status != "ready" or (profile.command or "").strip().startswith("<"):
        return "not runnable"
    if not (profile.command or "").strip() and not (profile.model_extra or {}).get("executableDiscovery"):
        return "broken"  # a user entry that names no command: nothing could ever be installed for it
    return "not installed"


def diagnose(agent: ResolvedAgent, builtins: dict[str, AgentProfile] | None = None) -> AgentDiagnosis:
    """Everything the doctor reports for one resolved profile (see the module doc).

    Args:
        agent: from :func:`~.profiles.list_agents` / :func:`~.profiles.resolve_profile`.
        builtins: :func:`~.profiles.builtin_profiles`, computed once by the caller of many.

    Returns:
        The :class:`AgentDiagnosis`. Only a found CLI/ACP executable allowed by
        :func:`probe_plan` is started (``--version``: at most
        :data:`~.versions.VERSION_TIMEOUT_S` s, ``--help``: :data:`~.versions.HELP_TIMEOUT_S` s,
        once per file version). Never raises for a profile's content.
    """
    profile = agent.profile
    result = AgentDiagnosis(id=agent.id, display_name=agent.display_name, driver=profile.driver if profile else None,
                            status=profile.status if profile else None, ok=agent.ok, message=agent.message,
                            command=agent.command, source=agent.source, state=_state(agent),
                            tested_versions=profile.tested_versions if profile else None)
    if profile is None:
        result.problems.append(agent.message)
        return result
    if not agent.ok or agent.command is None:
        return result
    exe = agent.command
    plan = probe_plan(agent.id, profile, builtins)
    if profile.driver == "gui":
        result.notes.append("desktop app: resolved only, never started")
        return result
    if plan.version_args is None:
        result.version_status = "not probed"
        result.notes.append(f"not probed ({plan.custom or 'custom command'}; set versionArgs to probe)")
    elif not plan.version_args:
        result.notes.append("version not asked (versionArgs is [])")
    else:
        result.probed = True
        probe = versions.run_probe(exe, plan.version_args, versions.VERSION_TIMEOUT_S)
        if probe is not None and probe.timed_out:
            result.notes.append(f"{_display(exe, plan.version_args)} did not finish within "
                                f"{versions.VERSION_TIMEOUT_S:g} s; killed")
        elif probe is not None:
            result.version = versions.parse_version(probe.output[:4096])
        status, problem = compare_version(result.version, profile.tested_versions)
        result.version_status = status
        if problem:
            result.problems.append(problem)
        if status == "older than tested":
            result.problems.append(f"version {result.version} is older than the tested range {profile.tested_versions}: "
                                   "upgrade it (flags the profile uses may be missing)")
        elif status == "newer than tested":
            result.notes.append(f"version {result.version} is newer than the tested range {profile.tested_versions}")
        elif profile.tested_versions is None and result.version is not None:
            result.notes.append("no testedVersions in the profile")
    result.flags = check_flags(exe, profile, plan.help_args, plan.custom)
    result.probed = result.probed or result.flags.help_command is not None
    for flag in result.flags.missing:
        result.problems.append(f"flag {flag} is not in the output of {result.flags.help_command}: "
                               "a task would fail on it (the CLI changed? update the profile or the CLI)")
    result.node, problem = check_node(exe, profile)
    if problem:
        result.problems.append(problem)
    result.auth, problem, note = check_auth(profile)
    result.problems.extend([problem] if problem else [])
    result.notes.extend([note] if note else [])
    if result.problems:
        result.state = "problem"
    return result


def diagnose_agents(agents: list[ResolvedAgent]) -> list[AgentDiagnosis]:
    """:func:`diagnose` for each of ``agents`` (in order), :data:`PROBE_WORKERS` at a time."""
    builtins = builtin_profiles()
    if not agents:
        return []
    with ThreadPoolExecutor(max_workers=min(PROBE_WORKERS, len(agents))) as pool:
        return list(pool.map(lambda a: diagnose(a, builtins), agents))


def diagnose_home(home: Path) -> list[AgentDiagnosis]:
    """Every profile of ``home`` (built-ins first, then the user's ids, then broken entries),
    diagnosed.

    Raises:
        TianshuError(CONFIG_INVALID | CONFIG_UNREADABLE): ``agent-profiles.json`` as a whole
            cannot be read.
    """
    return diagnose_agents(list_agents(home))


def exit_code(results: list[AgentDiagnosis]) -> int:
    """0 when no profile has a problem (an absent CLI is none), 1 otherwise."""
    return 1 if any(r.problems for r in results) else 0
