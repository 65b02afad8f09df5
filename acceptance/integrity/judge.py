"""The integrity judge of one verify round (docs/integrity.md): :class:`IntegritySession`.

Lifecycle, driven by :mod:`..engine`::

    session = IntegritySession(...); session.start()      # before the round's checks run
    results = run_checks(session.main_defs(), project, …)  # the agent's tree (the report's checks)
    outcome = session.finish(results, log_path)            # then always session.close()

``start`` lists what the agent changed, sorts out its test infrastructure, and starts, beside the
round's own checks: the **baseline run** (the test checks on the pre-work tree, once per task,
cached: :func:`..grading.baseline_runs.run_baseline_checks`; the flow starts it with the task, see
:mod:`..baseline_warm`, so a round usually finds it done) and, when the agent changed test
infrastructure, the **pristine run** (the test checks on :func:`.pristine.pristine_tree`, which
that run's thread checks out first). The
round's own checks and every run verification makes itself list each test's id
(:func:`.infra.id_argv`), so the inventory compares ids.

``finish`` re-runs failing checks to name flaky tests (:mod:`.flakes`), then decides, under
``protect``: ``TAMPERING`` (the agent's tree passes, the pristine tree fails; or production code
detects the test run), ``TESTS_REMOVED`` (baseline tests no longer ran where the round is
judged), ``TARGET_FAILED``, and runs the holdout checks on the pristine tree (``HOLDOUT_FAILED``,
saying only the behaviour area). ``allow-test-edits`` judges the agent's tree: removed tests are
reported, targets still gate. Claims in the agent's message are compared with the evidence.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from ...core.i18n import _
from ..config import CheckDef
from ..git import Baseline, run_git
from ..grading.ids import parse_test_ids
from ..grading.state import load_baseline_state
from ...core.procs import stop_requested
from ..grading.baseline_runs import check_key, outputs_from_log, check_status, run_baseline_checks, worktree_argv
from ..runner import run_checks
from ..testcount import is_test_check
from .awareness import scan_added_lines
from .claims import check_claims
from .flakes import FlakeVerdict, judge_flakes
from .holdout_run import run_holdout
from .holdout_store import holdout_log_path
from .infra import InfraKind, id_argv, infra_rules
from .inventory import Evidence, compare
from .models import HoldoutCheck, IntegrityPolicy
from .pristine import AgentChanges, PristineTree, agent_changes, pristine_tree
from .pycache import bytecode_env, prune_pycache, pycache_home
from .targets import Target, TargetStatus, brief_targets, describe, judge_target, match

__all__ = ["IntegritySession", "IntegrityOutcome", "pycache_home", "test_check_indices"]

log = logging.getLogger("tianshu_mcp")

FLAKE_RERUNS = 2
"""A failing test check runs this many more times on the same tree (docs/integrity.md §6)."""
_ASSERT_RE = r"\bassert\b|\bassert\w*\s*\(|\bexpect\s*\(|\bt\.(?:Error|Fatal)\w*\(|\bassert(?:_eq|_ne)?!\(|\bself\.assert\w+\("


TARGETS_SHOWN = 5
"""Failed targets a ``TARGET_FAILED`` item names (the rest are counted; ``report["targets"]`` has each)."""


@dataclass
class IntegrityOutcome:
    """What :meth:`IntegritySession.finish` decided.

    Attributes:
        blocking: ``[{code, message}]`` issues that fail the round.
        report: ``report["integrity"]``.
        not_counted: indices of the round's checks excused as known flakes.
        check_notes: index → a note for that check's result.
    """

    blocking: list[dict[str, str]] = field(default_factory=list)
    report: dict[str, Any] = field(default_factory=dict)
    not_counted: set[int] = field(default_factory=set)
    check_notes: dict[int, str] = field(default_factory=dict)


def test_check_indices(defs: Sequence[CheckDef], project: str | os.PathLike[str]) -> list[int]:
    """The indices of the checks that run tests, the ones the baseline run, the pristine run and
    the inventory judge: a required check that says so (its name, a known runner, JUnit XML) or
    runs a file of the project (``python tools/run_tests.py``: what it prints may be faked by the
    agent, so it is judged too)."""
    return [i for i, d in enumerate(defs) if not d.optional and (
        d.junit_xml or is_test_check(d.name, d.cmd) or infra_rules([d.cmd], Path(project)).argv_files)]


@dataclass
class _RoundEvidence:
    """The evidence of a round's test checks, by check index, as :meth:`IntegritySession._judge`
    gathers and judges it.

    Attributes:
        main: the round's checks as run (:meth:`IntegritySession.main_defs`).
        agent: evidence on the agent's tree.
        base: evidence at the baseline (the baseline run's cached entries).
        pristine: evidence on the pristine tree (when the test checks ran there).
        pristine_results: the pristine run's check results.
        excused_agent: checks whose failure on the agent's tree is excused as a known flake.
        excused_pristine: the same on the pristine tree.
        judged: the evidence each check is judged by (pristine when it ran there, else the agent's).
        lost: checks whose baseline tests no longer all ran where judged.
    """

    main: list[CheckDef]
    agent: dict[int, Evidence]
    base: dict[int, Evidence]
    pristine: dict[int, Evidence] = field(default_factory=dict)
    pristine_results: dict[int, Mapping[str, Any]] = field(default_factory=dict)
    excused_agent: set[int] = field(default_factory=set)
    excused_pristine: set[int] = field(default_factory=set)
    judged: dict[int, Evidence] = field(default_factory=dict)
    lost: set[int] = field(default_factory=set)


def _ok(ev: Evidence | None, excused: bool) -> bool:
    """Passed, or failed only as an excused flake."""
    return ev is not None and (ev.status == "passed" or excused)


class IntegritySession:
    """One round's integrity judgement (see the module doc). Not thread-safe; one per round."""

    def __init__(self, *, policy: IntegrityPolicy, project: str | os.PathLike[str], task_dir: Path,
                 baseline_dir: Path, round_no: int, baseline: Baseline, check_defs: Sequence[CheckDef],
                 task_text: str = "", target_tests: Sequence[str] = (), holdout: Sequence[HoldoutCheck] = (),
                 agent_message: str = "", default_timeout_ms: int = 300_000, concurrency: int = 1,
                 should_stop: Callable[[], bool] | None = None, pycache_dir: str | os.PathLike[str] | None = None) -> None:
        """Args: the round's policy, project, task directory (logs), the directory of the baseline's
        files (:mod:`..grading.state`), round number, baseline, command checks, brief, targets,
        holdout checks, the agent's final output, the check runner's settings, and the bytecode
        cache directory of verification's runs (default: :func:`pycache_home`)."""
        if pycache_dir is None:
            pycache_dir = pycache_home()
        self.policy = policy
        self.project = Path(project)
        self.task_dir = task_dir
        self.baseline_dir = baseline_dir
        self.round = round_no
        self.baseline = baseline
        self.defs = list(check_defs)
        self.task_text = task_text
        self.target_tests = list(target_tests)
        self.holdout = list(holdout)
        self.agent_message = agent_message
        self.timeout_ms = default_timeout_ms
        self.concurrency = concurrency
        self.should_stop = should_stop
        self.rules = infra_rules([d.cmd for d in self.defs], self.project)
        self.tests = test_check_indices(self.defs, self.project)
        self.notes: list[str] = []
        self._stack = ExitStack()
        self._threads: list[threading.Thread] = []
        self._base: dict[str, dict[str, Any]] = {}
        self._pristine: list[dict[str, Any]] | None = None
        self._pristine_defs: list[CheckDef] = []
        self.tree: PristineTree | None = None
        self.changes = AgentChanges()
        self._pycache = Path(pycache_dir)
        self.extra_env: dict[str, str] = bytecode_env(self._pycache)
        """Set for every run of the round: bytecode is written to and read from verification's own
        cache directory (one per machine user, shared by every home: the standard library is
        compiled once), never from the tree: an agent's planted ``__pycache__`` is not loaded.
        Writing bytecode is switched back on (an empty ``PYTHONDONTWRITEBYTECODE``): it goes to
        that directory only, and with it off every run compiled pytest and the standard library
        from source again (a second of CPU per run in a container that sets it)."""

    # --- before the round's checks -----------------------------------------------------------

    def main_defs(self) -> list[CheckDef]:
        """The round's checks with the id-listing flags (the report still shows the command)."""
        return [CheckDef(d.name, tuple(id_argv(d.cmd)), d.display_cmd, d.timeout_ms, d.optional, d.junit_xml)
                for d in self.defs]

    def start(self) -> None:
        """List the agent's changes, start the baseline run, and start the pristine run (it checks out
        the pristine tree first) when the agent changed test infrastructure (or holdout checks need
        a tree)."""
        try:
            top = Path(self._top())
            self.rules = infra_rules([d.cmd for d in self.defs], self.project, top)
            state = load_baseline_state(self.baseline_dir) or {}
            ignored = state.get("ignored") if state.get("head") == self.baseline.head else None
            self.changes = agent_changes(self.project, self.baseline, self.rules,
                                         ignored if isinstance(ignored, dict) else None)
            self.notes.extend(self.changes.notes)
        except Exception as exc:  # noqa: BLE001 - reported; the round is then judged without a pristine tree
            log.exception("listing the agent's changes failed")
            self.notes.append(_("the agent's changes could not be listed: {error}").format(error=exc))
        tests = [self.defs[i] for i in self.tests]
        if tests:
            self._spawn(self._run_baseline, tests)
        needs_tree = (self.policy is IntegrityPolicy.PROTECT and bool(self.changes.infra) and bool(tests)) or (
            self.policy is not IntegrityPolicy.OFF and bool(self.holdout))
        if needs_tree:  # checked out and run on a thread of its own, beside the round's checks
            self._spawn(self._run_pristine, tests)

    def _top(self) -> str:
        r = run_git(["rev-parse", "--show-toplevel"], self.project)
        return r.stdout.strip() if r.ok and r.stdout.strip() else str(self.project)

    def _spawn(self, fn: Callable[..., None], *args: Any) -> None:
        t = threading.Thread(target=fn, args=args, name=f"integrity-{fn.__name__}", daemon=True)
        t.start()
        self._threads.append(t)

    def _run_baseline(self, tests: list[CheckDef]) -> None:
        try:
            self._base, notes = run_baseline_checks(self.project, self.baseline_dir, self.baseline, tests,
                                                    self.timeout_ms, self.concurrency, self.should_stop,
                                                    self.extra_env)
            self.notes.extend(notes)
        except Exception as exc:  # noqa: BLE001
            log.exception("the baseline run failed")
            self.notes.append(_("the baseline run failed: {error}").format(error=exc))

    def _run_pristine(self, tests: list[CheckDef]) -> None:
        """Build the pristine tree (removed by :meth:`close`), then run the test checks there when it
        differs from the agent's tree."""
        try:
            tree = self._stack.enter_context(
                pristine_tree(self.project, self.baseline_dir, self.baseline, self.rules, self.changes))
        except Exception as exc:  # noqa: BLE001
            log.exception("building the pristine tree failed")
            tree = None
            self.notes.append(_("the pristine tree could not be built: {error}").format(error=exc))
        else:
            if tree is None:
                self.notes.append(_("the pristine tree could not be built"))
        self.tree = tree
        if tree is None or not tree.differs or not tests or stop_requested(self.should_stop):
            return
        self._pristine_defs = [worktree_argv(d, tree.project, self.project) for d in tests]
        try:
            self._pristine = run_checks(self._pristine_defs, tree.project, self._log("pristine"), self.timeout_ms,
                                        concurrency=self.concurrency, should_stop=self.should_stop,
                                        extra_env=self.extra_env)
        except Exception as exc:  # noqa: BLE001
            log.exception("the pristine run failed")
            self.notes.append(_("the pristine run failed: {error}").format(error=exc))

    def _log(self, what: str) -> Path:
        return self.task_dir / f"{what}-{self.round}.log"

    # --- after the round's checks --------------------------------------------------------------

    def finish(self, results: Sequence[Mapping[str, Any]], log_path: Path) -> IntegrityOutcome:
        """Judge the round (see the module doc). ``results``: the round's check results, in the
        order of the checks; ``log_path``: the round's verify log. Never raises."""
        for t in self._threads:
            t.join()
        out = IntegrityOutcome()
        try:
            self._judge(results, log_path, out)
        except Exception as exc:  # noqa: BLE001 - an integrity bug must not pass a round silently
            log.exception("the integrity judge failed")
            out.blocking.append({"code": "TAMPERING", "message": _(
                "verification integrity could not be judged ({error}); the round is not trusted").format(error=exc)})
        out.report.setdefault("notes", []).extend(n for n in dict.fromkeys(self.notes) if n)
        return out

    def close(self) -> None:
        """Remove the pristine tree (always call, also after an exception)."""
        for t in self._threads:
            t.join()
        self._stack.close()
        prune_pycache(self._pycache)

    def _evidence(self, defs: Sequence[CheckDef], results: Sequence[Mapping[str, Any]], log_path: Path,
                  wt: str | None = None) -> list[Evidence]:
        texts = outputs_from_log(log_path, defs, results, wt=wt, project=str(self.project) if wt else None)
        out = []
        for d, r, text in zip(defs, results, texts):
            st = check_status(r)
            ids = parse_test_ids(text, list(d.cmd)) if st in ("passed", "failed") else None
            out.append(Evidence(st, ids, r.get("tests") if isinstance(r.get("tests"), Mapping) else None))
        return out

    def _judge(self, results: Sequence[Mapping[str, Any]], log_path: Path, out: IntegrityOutcome) -> None:
        """Judge the round into ``out``, report keys in this order: policy and test checks, changed
        test infrastructure, the pristine run, flakes, the inventory, targets, test-aware production
        code, assertions, holdout checks, claims."""
        rep = out.report
        rep.update(policy=self.policy.value, testChecks=[self.defs[i].name for i in self.tests])
        infra_changed = sorted(self.changes.infra)
        rep["changedTestInfra"] = infra_changed[:100]
        ev = self._gather(results, log_path, out, infra_changed)
        rep["flaky"] = self._flakes(ev, out)
        self._judge_pristine(ev, out)
        rep["inventory"] = self._inventory(ev, out)
        rep["targets"] = self._targets(ev, out)
        top = Path(self._top())
        rep["testAware"] = self._test_aware(top, out)
        rep["assertions"] = self._assertions(top)  # test files the agent edited: assertions before and after
        if self.holdout:  # holdout checks, on the pristine tree, after the visible ones
            rows_h, failed_areas = run_holdout(self.holdout, self.tree, holdout_log_path(self.task_dir, self.round),
                                               self.timeout_ms, self.should_stop)
            rep["holdout"] = rows_h
            for area in failed_areas:
                out.blocking.append({"code": "HOLDOUT_FAILED", "message": _(
                    "a hidden check failed (behaviour area: {area})").format(area=area)})
        self._claims(results, ev, out)
        if not self.tests:
            self.notes.append(_("no test check ran: the test inventory and the pristine tree had nothing to compare"))

    def _gather(self, results: Sequence[Mapping[str, Any]], log_path: Path, out: IntegrityOutcome,
                infra_changed: list[str]) -> _RoundEvidence:
        """The test checks' evidence on the agent's tree, at the baseline and on the pristine tree
        (``report["pristine"]``). Under ``protect``, changed test infrastructure without a pristine
        tree to judge on is ``TAMPERING``."""
        main = self.main_defs()
        a_ev = self._evidence([main[i] for i in self.tests], [results[i] for i in self.tests], log_path)
        ev = _RoundEvidence(main=main, agent=dict(zip(self.tests, a_ev)), base={
            i: Evidence.from_entry(self._base[check_key(self.defs[i])])
            for i in self.tests if check_key(self.defs[i]) in self._base})
        rep = out.report
        if self.tree is not None:
            rep["pristine"] = {"built": True, "differs": self.tree.differs, "restored": self.tree.restored[:100],
                               "ignoredPlanted": self.changes.ignored[:100],
                               "excluded": self.tree.excluded[:100], "merged": self.tree.merged[:100],
                               "buildMs": self.tree.build_ms, "checks": []}
            self.notes.extend(self.tree.notes)
        if self._pristine is not None and self.tree is not None:
            p_ev = self._evidence(self._pristine_defs, self._pristine, self._log("pristine"), wt=str(self.tree.project))
            ev.pristine = dict(zip(self.tests, p_ev))
            ev.pristine_results = dict(zip(self.tests, self._pristine))
            rep["pristine"]["checks"] = [
                {"name": r.get("name"), "passed": bool(r.get("passed")), "exitCode": r.get("exitCode"),
                 "reason": r.get("reason"), "tests": r.get("tests")} for r in self._pristine]
        elif self.policy is IntegrityPolicy.PROTECT and infra_changed and self.tests and self.tree is None:
            out.blocking.append({"code": "TAMPERING", "message": _(
                "the agent changed test infrastructure ({files}) and the pristine tree to judge without those "
                "changes could not be built").format(files=", ".join(infra_changed[:10]))})
        return ev

    def _flakes(self, ev: _RoundEvidence, out: IntegrityOutcome) -> list[dict[str, Any]]:
        """Re-run failing test checks on the tree where they failed (:func:`.flakes.judge_flakes`):
        ``report["flaky"]``. A failure already flaky at the baseline is excused (on the agent's tree:
        not counted, with a note); a new flake is noted and counted."""
        flakes: list[dict[str, Any]] = []
        for i in self.tests:
            for where, e, cwd, d in (("agent", ev.agent.get(i), self.project, ev.main[i]),
                                     ("pristine", ev.pristine.get(i), self.tree.project if self.tree else None,
                                      self._pristine_defs[self.tests.index(i)] if ev.pristine else None)):
                if e is None or cwd is None or d is None or e.status != "failed":
                    continue
                v: FlakeVerdict = judge_flakes(
                    d, cwd, e, self._log("flaky"), self.timeout_ms, self.should_stop, FLAKE_RERUNS, self.extra_env,
                    base_entry=self._base.get(check_key(self.defs[i])), project=self.project,
                    baseline_dir=self.baseline_dir, baseline=self.baseline, base_def=self.defs[i],
                    wt=str(cwd) if where == "pristine" else None)
                if v.flaky:
                    flakes.append({"check": self.defs[i].name, "tree": where, "ids": v.flaky[:50],
                                   "flakyAtBaseline": v.at_baseline[:50], "excused": v.excused})
                if v.excused:
                    (ev.excused_agent if where == "agent" else ev.excused_pristine).add(i)
                    if where == "agent":
                        out.not_counted.add(i)
                        out.check_notes[i] = _("flaky: failed, then passed on retry; already flaky at the baseline")
                elif v.flaky and where == "agent":
                    out.check_notes[i] = _("flaky: passed on retry, but was not flaky at the baseline (counted)")
        return flakes

    def _judge_pristine(self, ev: _RoundEvidence, out: IntegrityOutcome) -> None:
        """Where each test check is judged (``ev.judged``): the pristine tree when it ran there, else
        the agent's tree. Passing on the agent's tree but failing on the pristine one is ``TAMPERING``."""
        for i in self.tests:
            a_ok = _ok(ev.agent.get(i), i in ev.excused_agent)
            if i in ev.pristine:
                p = ev.pristine[i]
                ev.judged[i] = p
                if a_ok and not _ok(p, i in ev.excused_pristine):
                    failing = p.ids.failed_ids[:5] if p.ids else []
                    why = str(ev.pristine_results[i].get("reason") or "")
                    out.blocking.append({"code": "TAMPERING", "message": _(
                        "check '{check}' passes on the agent's tree but fails with the baseline's tests{ids}{why}; "
                        "the test infrastructure the agent changed is not used to judge: {files}").format(
                            check=self.defs[i].name, ids=f" ({', '.join(failing)})" if failing else "",
                            why=f" ({why})" if why and not failing else "",
                            files=", ".join([*self.tree.restored, *self.tree.excluded, *self.tree.merged][:10])
                            if self.tree else "")})
            elif i in ev.agent:
                ev.judged[i] = ev.agent[i]

    def _inventory(self, ev: _RoundEvidence, out: IntegrityOutcome) -> list[dict[str, Any]]:
        """Baseline tests that no longer ran where the round is judged (``report["inventory"]``,
        ``ev.lost``): ``TESTS_REMOVED`` under ``protect`` when the check passes now, else a note."""
        protect = self.policy is IntegrityPolicy.PROTECT
        inv = []
        for i, now in ev.judged.items():
            base = ev.base.get(i)
            if base is None:
                continue
            res = compare(base, now)
            row = res.to_json(self.defs[i].name)
            row["tree"] = "pristine" if i in ev.pristine else "agent"
            inv.append(row)
            if not res.lost:
                continue
            ev.lost.add(i)
            what = (", ".join(res.removed[:10]) + (_(" … {n} more").format(n=len(res.removed) - 10)
                                                   if len(res.removed) > 10 else "")) if res.level == "ids" else \
                _("{b} ran at the baseline, {n} now").format(b=res.baseline_ran, n=res.now_ran or 0)
            msg = _("tests of check '{check}' that ran at the baseline no longer run (removed, skipped, xfail, "
                    "deselected or filtered): {what}").format(check=self.defs[i].name, what=what)
            passed_now = _ok(now, (i in ev.excused_pristine) if i in ev.pristine else (i in ev.excused_agent))
            if protect and passed_now:
                out.blocking.append({"code": "TESTS_REMOVED", "message": msg})
            else:
                self.notes.append(msg)
            row["blocking"] = protect and passed_now
        return inv

    def _targets(self, ev: _RoundEvidence, out: IntegrityOutcome) -> list[dict[str, Any]]:
        """The named targets (``targetTests``, then those of the brief): ``report["targets"]``; one
        that did not pass is ``TARGET_FAILED`` (unless integrity is off)."""
        base_ids = {t for e in ev.base.values() for t in e.ran}
        targets = [Target(t, "targetTests") for t in self.target_tests] + [
            t for t in brief_targets(self.task_text, base_ids) if not any(t.target == x for x in self.target_tests)]
        rows = []
        failed: list[str] = []
        for t in targets:
            status, where, ids = self._target(t, ev.judged, ev.agent, ev.base, ev.lost)
            rows.append({"target": t.target, "source": t.source, "status": status, "where": where, "ids": ids[:10]})
            if status != TargetStatus.PASSED and self.policy is not IntegrityPolicy.OFF:
                failed.append(_("target test {target} {status}").format(target=t.target, status=describe(status)))
        if failed:  # one blocking item: a brief naming 78 tests once made 78 of them (every row is in "targets")
            shown = "; ".join(failed[:TARGETS_SHOWN])
            more = _(" … {n} more (the report's targets list has them all)").format(n=len(failed) - TARGETS_SHOWN) \
                if len(failed) > TARGETS_SHOWN else ""
            out.blocking.append({"code": "TARGET_FAILED", "message": shown + more})
        return rows

    def _test_aware(self, top: Path, out: IntegrityOutcome) -> list[dict[str, Any]]:
        """Production code the agent changed that detects the test run (``report["testAware"]``):
        ``TAMPERING``."""
        prod = [p for p in self.changes.paths if self.changes.infra.get(p) in (None, InfraKind.EMBEDDED)]
        untracked = set(self.baseline.pre_existing_untracked)
        r = run_git(["ls-files", "--others", "--exclude-standard", "-z"], top)
        untracked |= {p for p in r.stdout.split("\0") if p} if r.ok else set()
        hits = scan_added_lines(top, self.baseline.head, prod, untracked, self.rules)
        if hits:
            out.blocking.append({"code": "TAMPERING", "message": _(
                "production code the agent changed detects the test run or defeats its assertions: {where}").format(
                    where="; ".join(f"{h.file}:{h.line}: {h.text.strip()[:80]}" for h in hits[:5]))})
        return [h.to_json() for h in hits]

    def _claims(self, results: Sequence[Mapping[str, Any]], ev: _RoundEvidence, out: IntegrityOutcome) -> None:
        """The agent's claims compared with the evidence (advisory): ``claims``, ``unsupportedClaims``."""
        failing = [str(results[i].get("name")) for i in range(len(results))
                   if not results[i].get("passed") and not results[i].get("skipped") and i not in out.not_counted]
        failing += [t for e in ev.judged.values() if e.ids for t in e.ids.failed_ids]
        passed = sum(int((results[i].get("tests") or {}).get("passed") or 0) for i in self.tests)
        ran_ids = {t for e in [*ev.agent.values(), *ev.pristine.values()] for t in e.ran}
        claims = check_claims(self.agent_message, failing=failing, passed_count=passed if self.tests else None,
                              ran_ids=ran_ids, changed_files=self.changes.paths)
        out.report["claims"] = [c.to_json() for c in claims]
        out.report["unsupportedClaims"] = [c.to_json() for c in claims if c.why]

    def _target(self, t: Target, judged: Mapping[int, Evidence], a_by: Mapping[int, Evidence],
                b_by: Mapping[int, Evidence], lost: set[int]) -> tuple[str, str, list[str]]:
        """A target's ``(status, tree, ids)``: judged where the round is (the pristine tree under
        ``protect``), then on the agent's tree (a test the agent added). A runner that does not list
        passing tests (Jest's default reporter) cannot show a passing target by id: a baseline test
        counts as passed when its check passed there, listed no failure of it and lost no test."""
        def look(evs: Sequence[Evidence]) -> tuple[str, list[str]]:
            passed = [x for ev in evs if ev.ids for x in ev.ids.passed_ids]
            failed = [x for ev in evs if ev.ids for x in ev.ids.failed_ids]
            return judge_target(t.target, passed, failed)

        status, ids = look(list(judged.values()))
        where = "pristine" if any(i not in a_by or judged[i] is not a_by[i] for i in judged) else "agent"
        if status != TargetStatus.MISSING:
            return status, where, ids
        for i, base in b_by.items():
            now = judged.get(i)
            known = [x for x in base.ran if match(t.target, x)]
            if known and now is not None and now.status == "passed" and not now.complete and i not in lost:
                return TargetStatus.PASSED, where + _(" (inferred from the counts)"), known
        status2, ids2 = look(list(a_by.values()))
        return (status2, "agent", ids2) if status2 != TargetStatus.MISSING else (status, where, ids)

    def _assertions(self, top: Path) -> list[dict[str, Any]]:
        pat = re.compile(_ASSERT_RE)
        rows = []
        for rel, kind in sorted(self.changes.infra.items()):
            if kind is not InfraKind.FILE or not self.baseline.head:
                continue
            r = run_git(["show", f"{self.baseline.head}:{rel}"], top)
            before = len(pat.findall(r.stdout)) if r.ok else None
            try:
                now_text = (top / rel).read_text(encoding="utf-8", errors="replace") if (top / rel).is_file() else None
            except OSError:
                now_text = None
            after = len(pat.findall(now_text)) if now_text is not None else None
            if before != after and (before or after):
                rows.append({"file": rel, "before": before, "after": after})
        if rows and self.policy is IntegrityPolicy.ALLOW_TEST_EDITS:
            lost = [r for r in rows if (r["after"] or 0) < (r["before"] or 0)]
            if lost:
                self.notes.append(_("test files lost assertions: {files}").format(files=", ".join(
                    f"{r['file']} ({r['before']} → {r['after'] or 0})" for r in lost[:10])))
        return rows[:50]
