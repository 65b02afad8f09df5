"""The process worker that runs this home's flow runs (docs/architecture.md §4).

Prefect 3.9's process worker, when the work pool's job configuration names no ``command``, starts
a *workspace supervisor* (``python -m prefect.runner._workspace_supervisor``) that copies the
deployment's storage into a temporary workspace and then starts ``python -m prefect.engine`` as a
second process: two interpreter starts and two ``import prefect`` per flow run (≈2 s of the
run_task → agent start time on 2 cores). Our flows live in an installed package (module-path
entrypoints, no storage to pull), so the supervisor has nothing to do. The worker here starts the
engine directly, with its own interpreter, through :mod:`.engine_cmd` (which takes a warm engine
from the fork server when the home runs one).

The command is fixed by the worker, not by the pool's job template: the locked template
(:func:`tianshu_mcp.deployments.setup.locked_job_template`) still has no ``command`` variable, so a
flow run cannot choose what the worker executes.
"""

from __future__ import annotations

from typing import Any

from prefect.utilities.processutils import command_to_string, get_sys_executable
from prefect.workers.process import ProcessJobConfiguration, ProcessWorker

from ..deployments.topology import WORK_POOL


ENGINE_COMMAND = "tianshu_mcp.hosting.engine_cmd"


class EngineJobConfiguration(ProcessJobConfiguration):
    """A process job configuration whose command is always
    ``<this interpreter> -m tianshu_mcp.hosting.engine_cmd``: the engine, forked warm by the
    home's fork server when there is one (:mod:`.forkserver`), else ``python -m prefect.engine``."""

    def prepare_for_flow_run(self, flow_run: Any, *args: Any, **kwargs: Any) -> None:
        """Fix the command before Prefect decides how to start the flow run process (a configured
        command makes the worker start it itself, in one process)."""
        self.command = command_to_string([get_sys_executable(), "-m", ENGINE_COMMAND])
        super().prepare_for_flow_run(flow_run, *args, **kwargs)


def process_worker(name: str, pool: str = WORK_POOL, limit: int | None = None) -> ProcessWorker:
    """A ``ProcessWorker`` on work pool ``pool`` (default ``tianshu``) that starts one engine
    process per flow run, at most ``limit`` at once (None: no limit of its own).

    The job configuration class is set on the instance, not through a subclass: a subclass of
    ``ProcessWorker`` would replace Prefect's registered ``process`` worker type for the whole
    interpreter.
    """
    worker = ProcessWorker(work_pool_name=pool, name=name, limit=limit)
    worker.job_configuration = EngineJobConfiguration  # type: ignore[misc]
    return worker
