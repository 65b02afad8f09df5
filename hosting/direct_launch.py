"""Start the home's own flow runs from the service itself (docs/design-notes.md, note 58).

The process worker starts a flow run in eight API requests and two process hops: it reads the
run's deployment twice and its flow, proposes Pending, patches the run's labels, proposes
Submitting, starts its launcher process (:mod:`.engine_cmd`), which asks the fork server for an
engine, and records the launcher's pid. Measured on a quiet 2-core machine, Pending → Running
took 0.8 s of the 1.6 s from ``run_task`` to the agent.

The service hosts both the API and the fork server, so for a run it has just made ready it does
the worker's job itself, with the same rules:

* **What to start** is what Prefect's own scheduling hands out: the work pool's
  ``get_scheduled_flow_runs`` (the same request the worker polls with), which honours the pool's
  and each project queue's concurrency limit and orders a queue by scheduled time (note 53).
* **Who starts it** is decided by Prefect's orchestration, as between two workers: the
  ``Pending`` proposal is the claim; a run the worker claimed first is answered with an abort and
  left alone, and the worker's claim of a run started here is refused the same way.
* **How** is the launcher's protocol of :mod:`.forkserver`, spoken by the service: the request
  carries the environment the worker would have given the run (the job configuration's, the
  engine's of :func:`.worker.engine_env`, the engine starter's ``PREFECT__*`` run variables),
  the service's standard output and error (where the worker streams a run's output) and a fresh
  temporary directory, as the worker's. The service holds the connection while the engine runs:
  closing it (the service died or stopped) makes the engine kill its tree, as a killed launcher
  does.
* **Afterwards**, as the worker does: the engine's pid is recorded as the run's
  ``infrastructure_pid``, and an engine that exits non-zero before its run is final is reported
  ``Crashed`` with Prefect's own explanation of the exit code.

What the worker does and this does not: the labels patch (the worker's name and pool on the run;
the UI shows the deployment's labels either way) and the ``Submitting`` state. A run this path
cannot take — the fork server is not listening (starting, restarting), the deployment names no
importable module — is left to the worker, which the caller then polls.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import socket
import tempfile
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any
from uuid import UUID

from ..core.forkclient import connect, decode_pid, decode_status, send_request
from ..core.ids import is_record_id
from ..core.procs import kill_recorded
from ..core.settings import task_dir
from ..tasks.common import AGENT_PROC_FILE
from .engine_handover import engine_fields, handover_env
from .worker import MODULE_ENTRYPOINT, engine_env

if TYPE_CHECKING:
    from prefect.client.orchestration import PrefectClient
    from prefect.client.schemas.objects import Flow, FlowRun, WorkPool
    from prefect.client.schemas.responses import DeploymentResponse

log = logging.getLogger("tianshu_mcp")


@dataclass(frozen=True)
class _Deployment:
    """What a launch needs of a run's deployment (read once per deployment id)."""

    deployment: DeploymentResponse
    flow: Flow
    entrypoint: str


class DirectLauncher:
    """Starts due flow runs of one work pool through the home's fork server (module doc).

    Args:
        socket_path: the fork server's socket (:func:`.forkserver.socket_path`).
        own_api: the API is the home's own service (see :func:`.worker.engine_env`).
    """

    def __init__(self, socket_path: Path, own_api: bool = True) -> None:
        self.socket_path = socket_path
        self.home = socket_path.parent.parent  # the home of forkserver.socket_path(home)
        self.own_api = own_api
        self._deployments: dict[UUID, _Deployment] = {}
        self._pools: dict[str, WorkPool] = {}
        self._watchers: set[asyncio.Task[None]] = set()
        self._settings_env: tuple[object, dict[str, str]] | None = None

    @property
    def running(self) -> int:
        """Engines started here whose exit has not been seen yet."""
        return len(self._watchers)

    async def launch_due(self, client: PrefectClient, pool: str, worker_name: str, worker_id: UUID | None = None) -> bool:
        """Start every run of work pool ``pool`` that Prefect's scheduling hands out now.

        Args:
            client: a connected ``PrefectClient`` of the home's API.
            pool: the work pool's name.
            worker_name, worker_id: the home's worker, whose job this does (the runs' attribution
                variables name it).

        Returns:
            True when every run handed out was started here or claimed by someone else; False
            when some is left for the worker (no fork server listening, a deployment that names
            no module): the caller then has the worker poll.

        Raises:
            Exception: what the API request for the due runs raised (nothing was claimed).
        """
        due = await client.get_scheduled_flow_runs_for_work_pool(pool, scheduled_before=datetime.now(timezone.utc))
        handled = True
        for response in due:
            handled = await self.launch(client, response.flow_run, worker_name, worker_id) and handled
        return handled

    async def launch(self, client: PrefectClient, flow_run: FlowRun, worker_name: str, worker_id: UUID | None = None) -> bool:
        """Claim one due run (propose ``Pending``) and start its engine.

        Args:
            client: a connected ``PrefectClient``.
            flow_run: the run (``prefect.client.schemas.objects.FlowRun``), as the pool handed it out.
            worker_name, worker_id: as in :meth:`launch_due`.

        Returns:
            True when it was started here, or claimed by someone else first (nothing started);
            False when it is left for the worker: no deployment, one that names no importable
            module, or no fork server listening (nothing was claimed then).
        """
        from prefect.exceptions import Abort
        from prefect.states import Pending
        from prefect.utilities.engine import propose_state

        if flow_run.deployment_id is None:
            return False
        known = await self._deployment(client, flow_run.deployment_id)
        if known is None:
            return False
        conn = connect(str(self.socket_path), timeout_s=5.0)
        if conn is None:
            return False
        try:
            state = await propose_state(client, Pending(), flow_run_id=flow_run.id)
        except Abort:
            conn.close()
            return True  # the worker (or another launch) has it
        except BaseException:
            conn.close()
            raise
        if not state.is_pending():
            conn.close()
            return True
        workdir = Path(tempfile.mkdtemp(suffix="prefect"))
        env = self.environment(flow_run, known.deployment, known.flow, worker_name, worker_id)
        fields = _engine_fields(known.entrypoint, flow_run)
        if fields is not None:  # the engine need not read the run nor write these two (note 81)
            env.update(handover_env(flow_run, state, fields, known.flow, known.deployment,
                                    await self._work_pool(client, flow_run.work_pool_name or known.deployment.work_pool_name)))
        try:
            pid = await _start(conn, env, workdir)
        except OSError as exc:
            conn.close()
            shutil.rmtree(workdir, ignore_errors=True)
            await _crash(client, flow_run.id, f"Failed to submit flow run to infrastructure: {exc}")
            return True
        task = asyncio.get_running_loop().create_task(self._follow(client, flow_run, conn, pid, workdir, fields or {}),
                                                      name=f"tianshu-engine-{flow_run.id}")
        self._watchers.add(task)
        task.add_done_callback(self._watchers.discard)
        log.info("flow run %s started directly (engine pid %d)", flow_run.id, pid)
        return True

    async def _deployment(self, client: PrefectClient, deployment_id: UUID) -> _Deployment | None:
        """The run's deployment and flow, cached; None when its entrypoint names no module."""
        known = self._deployments.get(deployment_id)
        if known is None:
            deployment = await client.read_deployment(deployment_id)
            flow = await client.read_flow(deployment.flow_id)
            known = _Deployment(deployment, flow, deployment.entrypoint or "")
            self._deployments[deployment_id] = known
        return known if MODULE_ENTRYPOINT.fullmatch(known.entrypoint) else None

    async def _work_pool(self, client: PrefectClient, name: str | None) -> WorkPool | None:
        """The work pool ``name`` as the API gives it, read once per service (for the events'
        labels, :mod:`.engine_handover`); None when it cannot be read."""
        if not name:
            return None
        if name not in self._pools:
            try:
                self._pools[name] = await client.read_work_pool(name)
            except Exception as exc:  # noqa: BLE001 - the engine reads it itself
                log.debug("work pool %s not read for the handover: %s", name, exc)
                return None
        return self._pools[name]

    def environment(self, flow_run: FlowRun, deployment: DeploymentResponse, flow: Flow, worker_name: str,
                    worker_id: UUID | None = None) -> dict[str, str]:
        """The flow-run process's environment as the worker composes it (Prefect 3.9's
        ``BaseJobConfiguration.prepare_for_flow_run``, ``ProcessJobConfiguration`` and
        ``EngineCommandStarter``): this process's variables, Prefect's settings, the run's id and
        attribution, the engine's variables (:func:`.worker.engine_env`) and the starter's
        ``PREFECT__*`` run variables.

        Args:
            flow_run, deployment, flow: the run and its deployment and flow, as the API gives them.
        """
        from prefect.workers.process import ProcessJobConfiguration as Job

        settings = self._settings_environment()  # the job's base environment, and the starter's
        env: dict[str, str | None] = {
            **os.environ,
            **settings,
            **Job._base_flow_run_environment(flow_run),
            **Job._base_attribution_environment(flow_run=flow_run, deployment=deployment, flow=flow,
                                                worker_id=worker_id, worker_name=worker_name),
            **engine_env(deployment.entrypoint, self.own_api),
            **settings,
            "PREFECT__FLOW_RUN_ID": str(flow_run.id),
            "PREFECT__ENABLE_CANCELLATION_AND_CRASHED_HOOKS": "false",
            "PREFECT__DEPLOYMENT_NAME": deployment.name,
        }
        return {k: str(v) for k, v in env.items() if v is not None}

    def _settings_environment(self) -> dict[str, str]:
        """Prefect's current settings as environment variables (``to_environment_variables(
        exclude_unset=True)``, what the worker passes twice: in the job's base environment and
        again in its engine starter), computed once per settings object: 12 ms each time, on
        the path from ``Pending`` to the engine's start (design note 77)."""
        from prefect.settings import get_current_settings

        settings = get_current_settings()
        cached = self._settings_env
        if cached is None or cached[0] is not settings:
            cached = (settings, settings.to_environment_variables(exclude_unset=True))
            self._settings_env = cached
        return cached[1]

    async def _follow(self, client: PrefectClient, flow_run: FlowRun, conn: socket.socket, pid: int, workdir: Path,
                      fields: dict[str, Any]) -> None:
        """Record the engine's pid (with ``fields``, the flow version and retry policy the engine
        was handed: :mod:`.engine_handover`), wait for its exit status and report a non-zero exit
        as a crash; on cancellation (the service stops) close the connection, which ends the engine."""
        try:
            try:
                await client.update_flow_run(flow_run_id=flow_run.id, infrastructure_pid=str(pid), **fields)
            except Exception as exc:  # noqa: BLE001 - the run goes on; only the UI's link to the pid is missing
                log.debug("could not record the engine pid of flow run %s: %s", flow_run.id, exc)
            status = await _recv_exact(conn, 4)
        finally:
            conn.close()
            shutil.rmtree(workdir, ignore_errors=True)
        if status is None:
            await self._orphans(flow_run)
            await _crash(client, flow_run.id, "The fork server stopped before reporting the flow run's exit status.")
            return
        code = os.waitstatus_to_exitcode(decode_status(status))
        if code != 0:
            from prefect._internal.infrastructure_exit_codes import get_infrastructure_exit_info

            await self._orphans(flow_run)
            info = get_infrastructure_exit_info(code)
            await _crash(client, flow_run.id,
                         f"Flow run infrastructure exited with non-zero status code {code}. {info.explanation}")

    async def _orphans(self, flow_run: FlowRun) -> None:
        """Kill the agent an engine that died abnormally left running: the agent runs in a session
        of its own and its engine, which would have ended it, is gone (a kill -9, the OOM killer).
        Its record is the task's ``agent-proc.json``; a finished agent's record kills nothing."""
        params = flow_run.parameters or {}
        record_id = params.get("task_id") or params.get("record_id")
        if isinstance(record_id, str) and is_record_id(record_id):
            await asyncio.to_thread(kill_recorded, task_dir(record_id, self.home) / AGENT_PROC_FILE)

    async def aclose(self) -> None:
        """Stop following the engines (their connections close: they end their trees)."""
        for task in list(self._watchers):
            task.cancel()
        await asyncio.gather(*self._watchers, return_exceptions=True)


def _engine_fields(entrypoint: str, flow_run: FlowRun) -> dict[str, Any] | None:
    """:func:`.engine_handover.engine_fields` of the run, or None (nothing handed over) when the
    flow cannot be loaded here; never raises."""
    try:
        return engine_fields(entrypoint, flow_run)
    except Exception as exc:  # noqa: BLE001 - the engine reads and patches the run itself
        log.debug("no handover for flow run %s: %s", flow_run.id, exc)
        return None


async def _start(conn: socket.socket, env: dict[str, str], cwd: Path) -> int:
    """Send one launch request (environment, directory, /dev/null and this process's stdout
    and stderr) and return the forked engine's pid.

    Raises:
        OSError: the request could not be sent or no pid came back.
    """
    devnull = os.open(os.devnull, os.O_RDONLY)
    try:
        conn.settimeout(5.0)
        send_request(conn, env, str(cwd), [devnull, 1, 2])
    finally:
        os.close(devnull)
    header = await _recv_exact(conn, 8)
    if header is None:
        raise OSError("the fork server closed the connection before starting an engine")
    return decode_pid(header)


async def _recv_exact(conn: socket.socket, size: int) -> bytes | None:
    """``size`` bytes from ``conn`` without blocking the loop; None when it closed first."""
    conn.setblocking(False)
    loop = asyncio.get_running_loop()
    data = b""
    while len(data) < size:
        try:
            chunk = await loop.sock_recv(conn, size - len(data))
        except OSError:
            return None
        if not chunk:
            return None
        data += chunk
    return data


async def _crash(client: PrefectClient, flow_run_id: UUID, message: str) -> None:
    """Propose ``Crashed`` as the worker does for a run whose process failed (a final run
    refuses it)."""
    from prefect.exceptions import Abort
    from prefect.states import Crashed
    from prefect.utilities.engine import propose_state

    try:
        await propose_state(client, Crashed(message=message), flow_run_id=flow_run_id)
    except Abort:
        pass
    except Exception as exc:  # noqa: BLE001 - the service's sweep crashes it on the next start
        log.warning("could not report flow run %s crashed: %s", flow_run_id, exc)
