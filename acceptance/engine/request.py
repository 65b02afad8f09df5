"""The input and the output of one verify round: :class:`VerifyRequest`, :class:`VerifyOutcome`
(docs/acceptance.md §3 request and result)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Literal, Mapping, Sequence

from ..config import AcceptanceCheck, CheckDef, PinnedRules
from ..git import Baseline
from ..integrity.models import HoldoutCheck

__all__ = ["VerifyRequest", "VerifyOutcome"]


@dataclass
class VerifyRequest:
    """Input of :func:`verify_round` (docs/acceptance.md §3 request).

    Attributes:
        task_id: task or verify-record id.
        project_path: normalised project root.
        task_dir: ``<home>/tasks/<id>``: receives verify-N.log, report-N.md/json.
        round: requested 0-based round (raised past existing reports).
        baseline: pre-work baseline (None → captured now: a pure health check).
        home: data home (global acceptance layer).
        acceptance_override: the task's ``acceptanceOverride`` (raw dict).
        extra_checks: verify_task ``extraChecks``; ``checks_mode`` ``append``/``replace``.
        project_verify: projects.json ``verify`` entries.
        task_text: the task brief (extension-hint note).
        verify_command_timeout_ms: default per-check timeout, ms.
        verify_concurrency: server default check parallelism (1..4), overridden by the layers.
        should_stop: cancellation probe.
        agent_work: False when no agent task is being judged (a manual or scheduled verification of
            a project): baseline grading then never excuses a failure (policy forced to
            ``strict``), because "it already failed before" is no excuse for a health check.
        baseline_dir: directory holding the baseline's grading files (``baseline-state.json``,
            ``baseline-untracked/``, the ``baseline-checks.json`` cache and log); None → ``task_dir``.
            ``verify_task(baselineRef=<taskId>)`` passes that task's directory.
        agent_run: the agent's outcome for the report (exit code, duration, output tail, fatal line).
        pinned_rules: the acceptance rules as of the task's baseline (the agent's own edits to them
            never judge its work; see :mod:`..pinning`).
        target_tests: ``targetTests`` (docs/integrity.md): test ids or names that must exist, run and pass
            (the task's, or a ``verify_task`` call's own); empty → none named.
        holdout_checks: checks the agent never sees (docs/integrity.md §5): the task's or verify record's
            ``holdout.json`` plus the project's registered ones
            (:func:`..integrity.holdout_store.load_holdout`); empty → none.
        agent_owned_paths: globs of untracked files the agent's CLI keeps for itself (its
            profile's ``ownedPaths``, docs/real-agents.md): never counted as the agent's change.
        brief_file: the prompt the agent got in the round judged (``<taskDir>/prompt-<round>.txt``),
            shown in the report; None when no agent's round is judged.
    """

    task_id: str
    project_path: str
    task_dir: Path
    round: int
    baseline: Baseline | None
    home: Path
    acceptance_override: Mapping[str, Any] | None = None
    extra_checks: Sequence[AcceptanceCheck | CheckDef | Mapping[str, Any]] | None = None
    checks_mode: Literal["append", "replace"] | str = "append"
    task_text: str = ""
    verify_command_timeout_ms: int = 300_000
    verify_concurrency: int = 2
    should_stop: Callable[[], bool] | None = None
    project_verify: Sequence[AcceptanceCheck | CheckDef | Mapping[str, Any]] | None = None
    baseline_dir: Path | None = None
    agent_work: bool = True
    agent_run: Mapping[str, Any] | None = None
    pinned_rules: PinnedRules | None = None
    target_tests: Sequence[str] = ()
    holdout_checks: Sequence[HoldoutCheck] = ()
    agent_owned_paths: Sequence[str] = ()
    brief_file: Path | None = None


@dataclass
class VerifyOutcome:
    """Result of :func:`verify_round`.

    ``report`` is the dict written to ``json_path``; ``failed_checks`` = names of failing mandatory
    checks (not passed, not skipped, not optional); ``blocking_issues`` = ``[{code, message}]``.
    """

    round: int
    passed: bool
    report: dict[str, Any]
    md_path: Path
    json_path: Path
    failed_checks: list[str] = field(default_factory=list)
    blocking_issues: list[dict[str, str]] = field(default_factory=list)
    baseline: Baseline | None = None
