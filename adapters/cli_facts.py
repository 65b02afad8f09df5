"""What a CLI profile knows about its CLI beyond the command line (docs/real-agents.md): how to read its
output, when it is stuck, which files are its own, what its exit codes mean, the versions it was
tested with and where it finds its credentials. :mod:`.profiles` holds these as fields of
:class:`~.profiles.AgentProfile`; this module has their types and checks them when a profile loads.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..core.i18n import _
from .output.formats import READERS
from .output.liveness import (
    DEFAULT_MAX_RETRIES,
    DEFAULT_STALL_AFTER_MS,
    DEFAULT_WINDOW_MS,
)

MATCH_ALL = frozenset({"*", "**", "**/*", "*/**", ".*"})
"""``ownedPaths`` globs that would hide every file of the project, not a CLI's own files."""


class LivenessSettings(BaseModel):
    """A profile's ``liveness`` (docs/real-agents.md §4;
    :class:`~tianshu_mcp.adapters.output.liveness.Liveness`).

    Fields (default): max_retries (``maxRetries``, 3: the retry of a 401/403/429 model call that
    ends the round), window_ms (``windowMs``, 20000: how long after the first such retry the
    round ends at the latest, ms), stall_after_ms (``stallAfterMs``, 120000: silence after which
    ``agent_stalled`` is sent, ms).
    """

    model_config = ConfigDict(populate_by_name=True, strict=True, extra="forbid")

    max_retries: int = Field(DEFAULT_MAX_RETRIES, ge=1, alias="maxRetries")
    window_ms: int = Field(DEFAULT_WINDOW_MS, ge=1000, alias="windowMs")
    stall_after_ms: int = Field(DEFAULT_STALL_AFTER_MS, ge=1000, alias="stallAfterMs")


class AuthSource(BaseModel):
    """One place an agent CLI finds its credentials (``authSources`` entry, docs/real-agents.md §5).

    Fields: env (an environment variable that holds a key or a token), file (a login file, ``~``
    for the home), note (what it is, e.g. "API key", "Claude login"). Exactly one of env/file.
    """

    model_config = ConfigDict(populate_by_name=True, strict=True, extra="forbid")

    env: str | None = None
    file: str | None = None
    note: str = ""

    @model_validator(mode="after")
    def _one_place(self) -> "AuthSource":
        if (self.env is None) == (self.file is None):
            raise ValueError(_("an authSources entry names exactly one of 'env' and 'file'"))
        return self


def check_cli_facts(output_format: str | None, exit_codes: Mapping[str, str], owned_paths: Sequence[str],
                    specifiers: Mapping[str, str | None]) -> None:
    """Check the profile fields of docs/real-agents.md.

    Raises:
        ValueError: ``outputFormat`` names no reader; an ``exitCodes`` key is not an exit code as
            a process reports it (``"41"``, ``"-9"``: no sign, no leading zero); an ``ownedPaths``
            glob is empty, absolute, climbs out of the project (``..``) or matches every file;
            ``testedVersions`` / ``nodeVersions`` is not a PEP 440 specifier. The message names
            the field.
    """
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    if output_format is not None and output_format not in READERS:
        raise ValueError(_("outputFormat: {value} is not one of {known} (leave it out for plain text)").format(
            value=repr(output_format), known=", ".join(sorted(READERS))))
    for code in exit_codes:
        try:
            canonical = str(int(code))
        except ValueError:
            canonical = ""
        if canonical != code:
            raise ValueError(_("exitCodes: {code} is not an exit code").format(code=repr(code)))
    for glob in owned_paths:
        parts = glob.replace("\\", "/").split("/")
        if not glob.strip() or glob.startswith(("/", "~")) or ".." in parts or glob.strip() in MATCH_ALL:
            raise ValueError(_("ownedPaths: {glob} must name the CLI's own files inside the project (not empty, not "
                               "absolute, no '..', not every file)").format(glob=repr(glob)))
    for field, spec in specifiers.items():
        if spec is None:
            continue
        try:
            SpecifierSet(spec)
        except InvalidSpecifier:
            raise ValueError(_("{field}: {spec} is not a PEP 440 version specifier (e.g. '>=22' or '==0.61.*')").format(
                field=field, spec=repr(spec))) from None
