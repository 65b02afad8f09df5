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

The worker also gives the engine what it would otherwise ask the API for, round trips measured on
the way from a run's start to its flow function (docs/design-notes.md, note 56):

* ``PREFECT__FLOW_ENTRYPOINT``: the deployment's entrypoint when it names an importable module
  (``package.module:flow``, our deployments' form), as Prefect's own workspace supervisor sets
  it. Without it the engine reads the deployment again, starts an event loop thread to import the
  flow and, since the entrypoint has a colon, first "downloads" the deployment's (absent) storage
  into the working directory.
* ``PREFECT_CLIENT_SERVER_VERSION_CHECK_ENABLED=False``: the worker's own client checked the
  API's version when it connected; each engine client would ask ``/admin/version`` again
  (Prefect documents the setting for exactly such worker subprocesses).
* ``PREFECT_CLIENT_CSRF_SUPPORT_ENABLED=False``, only for the worker of the home's own service:
  its API runs in the service's process with Prefect's CSRF protection off (the default), so
  each engine client's ``/csrf-token`` request is answered 422. A scale-out worker keeps the
  client's default, since its server may protect against CSRF.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

from prefect.utilities.processutils import command_to_string, get_sys_executable
from prefect.workers.process import ProcessJobConfiguration, ProcessWorker

from ..deployments.topology import WORK_POOL


ENGINE_COMMAND = "tianshu_mcp.hosting.engine_cmd"
MODULE_ENTRYPOINT = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*(:[A-Za-z_]\w*)?")
"""An entrypoint that names a module: ``package.module:flow`` or ``package.module.flow``."""


class EngineJobConfiguration(ProcessJobConfiguration):
    """A process job configuration whose command is always
    ``<this interpreter> -m tianshu_mcp.hosting.engine_cmd``: the engine, forked warm by the
    home's fork server when there is one (:mod:`.forkserver`), else ``python -m prefect.engine``."""

    own_api: ClassVar[bool] = False
    """True for the worker of the home's own service (its API in-process, CSRF protection off)."""

    def prepare_for_flow_run(self, flow_run: Any, deployment: Any = None, *args: Any, **kwargs: Any) -> None:
        """Fix the command before Prefect decides how to start the flow run process (a configured
        command makes the worker start it itself, in one process), and add the engine's
        environment (module doc)."""
        self.command = command_to_string([get_sys_executable(), "-m", ENGINE_COMMAND])
        super().prepare_for_flow_run(flow_run, deployment, *args, **kwargs)
        self.env.update(engine_env(getattr(deployment, "entrypoint", None), self.own_api))


class OwnApiJobConfiguration(EngineJobConfiguration):
    """:class:`EngineJobConfiguration` for the worker of the home's own service."""

    own_api: ClassVar[bool] = True


def engine_env(entrypoint: str | None, own_api: bool) -> dict[str, str]:
    """The variables the worker adds to a flow-run process's environment (module doc).

    Args:
        entrypoint: the deployment's entrypoint; only one naming a module (``package.module:flow``
            or ``package.module.flow``) is passed on: a file path (``flows/x.py:flow``) would need
            the deployment's storage.
        own_api: the API is the home's own service (no CSRF protection).
    """
    env = {"PREFECT_CLIENT_SERVER_VERSION_CHECK_ENABLED": "False"}  # as Prefect writes a bool
    if entrypoint and MODULE_ENTRYPOINT.fullmatch(entrypoint):
        env["PREFECT__FLOW_ENTRYPOINT"] = entrypoint
    if own_api:
        env["PREFECT_CLIENT_CSRF_SUPPORT_ENABLED"] = "False"
    return env


def process_worker(name: str, pool: str = WORK_POOL, limit: int | None = None, own_api: bool = False) -> ProcessWorker:
    """A ``ProcessWorker`` on work pool ``pool`` (default ``tianshu``) that starts one engine
    process per flow run, at most ``limit`` at once (None: no limit of its own); ``own_api``:
    it serves the home's own service, whose API runs in the same process.

    The job configuration class is set on the instance, not through a subclass: a subclass of
    ``ProcessWorker`` would replace Prefect's registered ``process`` worker type for the whole
    interpreter.
    """
    worker = ProcessWorker(work_pool_name=pool, name=name, limit=limit)
    worker.job_configuration = OwnApiJobConfiguration if own_api else EngineJobConfiguration  # type: ignore[misc]
    return worker
