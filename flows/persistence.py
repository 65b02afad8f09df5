"""Our flows keep no results in Prefect's result storage, and say so up front (docs/design-notes.md,
note 78).

A flow's state is its result here (``Completed``/``Failed`` with the task's message); the
records and reports live in the task's directory. Prefect persists results only when a default
result-storage block is configured on the server, which a home's service never has, so nothing
was ever written. But to find that out every flow-run process asked the API twice before the
flow function started (``_get_default_persist_result`` and ``ResultStore.update_for_flow``: the
server's default result storage), two round trips between ``Running`` and the agent's start.

:data:`NO_RESULTS` is the flows' decorator options that answer both without the API:
``persist_result=False``, and the local storage path Prefect would fall back to as the flow's
``result_storage`` (a path resolves to a local file system without an API call; with
persistence off it is never written).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def _local_results_path() -> Path:
    """Prefect's local result storage path (``PREFECT_RESULTS_LOCAL_STORAGE_PATH``, by default
    ``$PREFECT_HOME/storage``), as Prefect's own fallback would use it."""
    from prefect.settings import get_current_settings

    return Path(get_current_settings().results.local_storage_path)


NO_RESULTS: dict[str, Any] = {"persist_result": False, "result_storage": _local_results_path()}
"""``@flow(..., **NO_RESULTS)``: no result persistence and no API read to decide it."""
