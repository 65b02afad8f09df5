"""Prefect task ``baseline``: capture the git baseline once per task (docs/acceptance.md §4.1)."""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor

from ..acceptance.git import Baseline, capture_baseline
from ..acceptance.grading.grade import maybe_capture_baseline_state
from ..acceptance.pinning import pin_rules
from ..core.errors import TianshuError
from ..core.files import atomic_write_json, read_json_safe
from ..core.projects import ProjectRegistry
from ..core.settings import data_home
from .common import step, store


@step("baseline", task_run_name="baseline")
def capture_baseline_task(task_id: str, project_path: str, work_path: str | None = None) -> Baseline:
    """Capture (or reuse) ``<taskDir>/baseline.json`` before the agent starts.

    A rework round or a re-run of the flow reuses the stored baseline, so the judgement is always
    against the pre-work state; the project's acceptance rules are pinned with it
    (:mod:`..acceptance.pinning`). Returns the :class:`Baseline` (stored as JSON, camelCase keys).

    Args:
        project_path: the project (its ``projects.json`` entry).
        work_path: where the task works (its worktree; default ``project_path``): the baseline
            and the pinned rules are read there.

    Raises:
        GitFailed: git refused (nothing is stored; the task must not start).
    """
    st = store()
    path = st.dir(task_id) / "baseline.json"
    existing = read_json_safe(path)
    if isinstance(existing, dict):
        return Baseline.model_validate(existing)
    work = work_path or project_path
    meta = st.read(task_id) or {}
    # what is needed to rebuild the pre-work tree later (baseline-aware grading, verification
    # integrity), captured beside the baseline: both only read the repository (the snapshot's
    # stash commit is made on a copy of the index), and the agent starts after both
    with ThreadPoolExecutor(1, thread_name_prefix="baseline-state") as pool:
        state = pool.submit(maybe_capture_baseline_state, work, st.dir(task_id), data_home(),
                            meta.get("acceptanceOverride"))
        baseline = capture_baseline(work)
        data = baseline.model_dump(by_alias=True, mode="json")
        try:
            verify = (ProjectRegistry(data_home()).get(project_path) or {}).get("verify")
        except TianshuError:
            verify = None  # a corrupt projects.json: verification reports it
        pin_rules(work, st.dir(task_id), data_home(), verify if isinstance(verify, list) else None)
        atomic_write_json(path, data)
        state.result()
    return baseline


def load_baseline(data: Baseline | Mapping[str, object]) -> Baseline:
    """The :class:`Baseline` itself, or rebuilt from its JSON form (``baseline.json``)."""
    return data if isinstance(data, Baseline) else Baseline.model_validate(data)
