"""Our flows keep no results in Prefect's result storage and decide so without asking the API
(flows/persistence.py, design note 78): each flow-run process asked the server for its default
result storage twice before the flow function started."""

from __future__ import annotations

from typing import Any

import pytest


def test_no_api_read_decides_where_results_would_go(monkeypatch: pytest.MonkeyPatch) -> None:
    import prefect.results as results
    from prefect.filesystems import LocalFileSystem

    from tianshu_mcp.flows.run_task import run_task_flow
    from tianshu_mcp.flows.verify import reverify_flow, verify_flow

    def no_api(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("asked the API for the server's default result storage")

    monkeypatch.setattr(results, "_read_server_default_result_storage_block_id", no_api)
    monkeypatch.setattr(results, "_aread_server_default_result_storage_block_id", no_api)
    from prefect.settings import PREFECT_API_URL, temporary_settings

    # an engine's API (never reached here: a closed port), so Prefect starts no ephemeral server
    with temporary_settings({PREFECT_API_URL: "http://127.0.0.1:9/api"}):
        for flow in (run_task_flow, verify_flow, reverify_flow):
            assert flow.persist_result is False, flow.name  # the engine then never calls _get_default_persist_result
            store = results.ResultStore().update_for_flow(flow, _sync=True)
            assert isinstance(store.result_storage, LocalFileSystem), flow.name
