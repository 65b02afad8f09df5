"""A stdio server on the home's service hands submission to the service (POST /tianshu/intake) and
reads flow-run states with plain HTTP (mcp_server/run_states.py): it runs and polls a task without
ever importing Prefect (design note 84)."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from conftest import auth_headers
from fixture_project import make_calc_repo
from test_stdio_host import RawClient, _init

from tianshu_mcp.hosting.embedded import identity_app
from tianshu_mcp.hosting.identity import INTAKE_PATH, auth_header
from tianshu_mcp.mcp_server.run_states import StateReader, parse_run

pytestmark = pytest.mark.prefect


class ImportLoggingClient(RawClient):
    """A RawClient whose server logs every import it makes (``PYTHONPROFILEIMPORTTIME``)."""

    def __init__(self, home: Path) -> None:  # noqa: D107 - as RawClient, with the import log
        super().__init__(home, {"PYTHONPROFILEIMPORTTIME": "1"}, f"stdio-imports-{uuid.uuid4().hex[:8]}.stderr")

    def imported(self) -> set[str]:
        """Top-level packages the server imported (read once it has exited)."""
        text = Path(self.stderr.name).read_text(errors="replace")
        return {m.group(1).split(".")[0] for m in re.finditer(r"^import time:\s+\d+ \|\s+\d+ \|\s+(\S+)", text, re.M)}


def test_a_task_is_run_and_polled_without_importing_prefect(ts_daemon: dict[str, Any], tmp_path: Path) -> None:
    home = ts_daemon["home"]
    repo = make_calc_repo(tmp_path / "calc")
    client = ImportLoggingClient(home)
    try:
        _init(client)
        started = client.call("run_task", {"projectPath": str(repo), "task": "noop", "agentId": "scripted-noop",
                                           "autoVerify": False})
        assert not started.get("isError"), started
        task_id = started["structuredContent"]["taskId"]
        waited = client.call("wait_task", {"taskId": task_id, "timeoutMs": 240000}, timeout=300)
        assert waited["structuredContent"]["status"] == "succeeded", waited
        queried = client.call("query_task", {"taskId": task_id})
        assert queried["structuredContent"]["status"] == "succeeded"
        listed = client.call("query_info", {"type": "tasks", "projectPath": str(repo)})
        assert [t["taskId"] for t in listed["structuredContent"]["tasks"]] == [task_id]
    finally:
        assert client.close() == 0
    imported = client.imported()
    assert "mcp" in imported and "prefect" not in imported, sorted(imported)
    record = json.loads((home / "tasks" / task_id / "task.json").read_text())
    run = httpx.get(f"{ts_daemon['api']}/flow_runs/{record['flowRunId']}", headers=auth_headers(home), timeout=10).json()
    assert run["state"]["type"] == "COMPLETED" and run["name"].startswith(f"{task_id} · ")


def test_the_intake_route_wakes_the_service_and_refuses_strangers() -> None:
    woken: list[int] = []

    async def prefect_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 404, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    app = identity_app(prefect_app, {"homeId": "h"}, "u:p", None, lambda: woken.append(1))
    transport = httpx.ASGITransport(app=app)

    async def go() -> list[int]:
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as http:
            codes = [(await http.post(INTAKE_PATH, headers=auth_header("u:p"))).status_code,
                     (await http.post(INTAKE_PATH)).status_code,
                     (await http.post(INTAKE_PATH, headers=auth_header("u:wrong"))).status_code,
                     (await http.get(INTAKE_PATH, headers=auth_header("u:p"))).status_code,
                     # a header that is not ASCII (found by a tester: it was a 500 and a traceback)
                     (await http.post(INTAKE_PATH, headers={"Authorization": b"Basic \xff\xfe"})).status_code,
                     (await http.get("/tianshu/identity", headers={"Authorization": b"Basic \xff\xfe"})).status_code]
        return codes

    assert anyio.run(go) == [204, 401, 401, 405, 401, 401]
    assert woken == [1]
    # without a loop that submits (in-process hosting) there is no such route: Prefect's 404
    bare = httpx.ASGITransport(app=identity_app(prefect_app, {"homeId": "h"}, "u:p", None, None))

    async def plain() -> int:
        async with httpx.AsyncClient(transport=bare, base_url="http://t") as http:
            return (await http.post(INTAKE_PATH, headers=auth_header("u:p"))).status_code

    assert anyio.run(plain) == 404


@pytest.mark.parametrize("run, expected", [
    ({"id": "a", "state": {"type": "COMPLETED", "name": "Succeeded", "message": "ok",
                           "timestamp": "2026-12-05T09:15:00.123456Z"}},
     ("a", "COMPLETED", "Succeeded", "ok", "2026-12-05T09:15:00.123Z")),
    ({"id": "b", "state": {"type": "RUNNING", "timestamp": "2026-12-05T09:15:00+00:00"}},
     ("b", "RUNNING", "Running", None, "2026-12-05T09:15:00.000Z")),
    ({"id": "c", "state": {"type": "FAILED", "name": 3, "message": ["x"], "timestamp": "yesterday"}},
     ("c", "FAILED", "Failed", None, None)),
    ({"id": "d", "state": None}, None),
    ({"id": 5, "state": {"type": "COMPLETED"}}, None),
    ("not a run", None),
])
def test_a_run_as_the_api_answers_it_is_read_field_by_field(run: Any, expected: Any) -> None:
    parsed = parse_run(run)
    if expected is None:
        assert parsed is None
    else:
        assert parsed is not None
        assert (parsed[0], parsed[1].type, parsed[1].name, parsed[1].message, parsed[1].timestamp) == expected


def test_the_reader_reads_one_many_and_deleted_runs_and_retries_a_busy_api(ts_daemon: dict[str, Any]) -> None:
    home = ts_daemon["home"]
    headers = auth_headers(home)
    api = ts_daemon["api"]
    dep = httpx.get(f"{api}/deployments/name/run-task/run-task", headers=headers, timeout=10).json()
    runs = [httpx.post(f"{api}/deployments/{dep['id']}/create_flow_run", headers=headers, timeout=10, json={
        "name": f"reader-{i}", "state": {"type": "COMPLETED", "name": "Succeeded"},
        "parameters": {"task_id": f"tsk_reader_{i}", "project_path": "/nowhere", "agent_id": "none"}}).json()
        for i in range(3)]
    ids = [uuid.UUID(r["id"]) for r in runs]
    gone = uuid.uuid4()
    auth = (home / "prefect" / "credentials").read_text().strip()

    async def go() -> tuple[Any, Any, Any]:
        reader = StateReader(api, auth)
        try:
            return await reader.read(ids[:1]), await reader.read(ids + [gone]), await reader.read([gone])
        finally:
            await reader.aclose()

    one, many, none = anyio.run(go)
    assert list(one) == [str(ids[0])]
    assert set(many) == {str(i) for i in ids} and none == {}
    for r in runs:
        assert many[r["id"]].type == r["state"]["type"]

    calls: list[int] = []

    def busy_twice(request: httpx.Request) -> httpx.Response:
        calls.append(1)
        if len(calls) < 3:
            return httpx.Response(503, json={"exception_message": "database is locked"})
        return httpx.Response(200, json={"id": str(ids[0]), "state": {"type": "RUNNING", "name": "Running"}})

    async def flaky() -> Any:
        reader = StateReader("http://t/api", "u:p")
        reader._http = httpx.AsyncClient(transport=httpx.MockTransport(busy_twice))
        try:
            return await reader.read(ids[:1])
        finally:
            await reader.aclose()

    assert anyio.run(flaky)[str(ids[0])].type == "RUNNING" and len(calls) == 3
