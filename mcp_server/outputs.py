"""Output schemas: what every tool's ``structuredContent`` holds, as pydantic models (docs/host-parity.md §2).

Each tool publishes the JSON Schema of its model as ``outputSchema`` in ``tools/list``, and every
result — success or error — validates against it: a success carries the meta block (docs/tools.md
§2.6) and its per-tool extras, an error carries only ``error: {code, message}``. The schemas are
generated from the models below, so the published contract and the code that fills it cannot drift
apart silently: ``tests/test_outputs.py`` validates the results of every tool against
:func:`output_schema` and against :func:`output_schema` ``(strict=True)``, which also refuses a key
no model declares.

Published schemas allow keys beyond the declared ones (``additionalProperties`` is left open): a
host validating results (the Python SDK client does, on every call) keeps working when a newer
server adds a field. Nested models are inlined (no ``$ref``), for hosts with simple validators. A
top-level key whose value is None is left out of the meta block; nested objects (a profile's
``driver``) may hold null, so optional fields admit it.
"""

from __future__ import annotations

import functools
import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.json_schema import GenerateJsonSchema

Status = Literal["queued", "running", "verify_start", "fixing", "succeeded", "failed", "needs_attention",
                 "needs_user", "cancelled", "interrupted"]


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class ErrorBody(BaseModel):
    """A tool error: the stable code and the human message (docs/tools.md §2.2)."""

    code: str = Field(description="stable error code, e.g. TASK_NOT_FOUND")
    message: str


class ReportFiles(_Open):
    """Paths of a round's acceptance report."""

    md: str | None = None
    json_: str | None = Field(None, alias="json")
    html: str | None = None


class GuiStop(_Open):
    """How a desktop agent's round was stopped."""

    clicked: bool | None = None
    idle: bool | None = None


class ActiveTask(_Open):
    """An unfinished task of the same work tree (run_task only)."""

    taskId: str
    status: str | None = None


class TaskEvent(_Open):
    """One semantic event of ``task.jsonl`` (docs/tools.md §3.4)."""

    ts: str
    event: str
    detail: str | None = None


class UnsupportedClaim(_Open):
    """A claim of the agent's final message that the measurements do not support (docs/integrity.md)."""

    claim: str
    why: str


class Merge(_Open):
    """What ``manage_task(action="merge")`` did."""

    branch: str | None = None
    mergeCommit: str | None = None
    alreadyMerged: bool | None = None


class _Base(BaseModel):
    """Every result: ``ok`` and ``message`` on success, ``error`` alone on failure."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    ok: bool | None = Field(None, description="success of the call's subject (a task: status == succeeded)")
    message: str | None = None
    error: ErrorBody | None = Field(None, description="present only on an error result (isError true)")
    damagedFields: list[str] | None = Field(None, description="fields of a damaged record left out (wrong type)")


class TaskMeta(_Base):
    """The meta block of one task (docs/tools.md §2.6), plus its Prefect links and isolation fields."""

    taskId: str | None = None
    status: Status | None = None
    agentId: str | None = None
    projectPath: str | None = None
    model: str | None = None
    mode: str | None = None
    round: int | None = Field(None, description="the latest round's number, from 0 (its report is report-<round>); "
                                                "absent before the first round")
    roundsUsed: int | None = Field(None, description="agent rounds used")
    changedFiles: list[str] | None = None
    diffstat: str | None = Field(None, description='"+added -deleted"')
    reportFiles: ReportFiles | None = None
    logFile: str | None = None
    errorType: str | None = None
    cancelReason: str | None = None
    cancelRequestedAt: str | None = None
    abortSource: str | None = None
    finishedAt: str | None = None
    reportRound: int | None = None
    verificationSource: str | None = Field(None, description="auto | manual | scheduled")
    latestVerificationVerdict: Literal["passed", "failed"] | None = None
    agentEndReason: str | None = None
    agentExitCode: int | None = None
    agentDurationMs: int | None = None
    needsUserKind: str | None = None
    pendingQuestion: str | None = None
    pendingVisualVerification: bool | None = None
    progressSummary: str | None = None
    guiStop: GuiStop | None = None
    flowRunId: str | None = None
    flowRunUrl: str | None = None
    prefectApiUrl: str | None = None
    idempotencyKey: str | None = None
    dryRun: bool | None = None
    dryRunReportFiles: ReportFiles | None = None
    dryRunPlanDoc: str | None = None
    isolation: Literal["inplace", "worktree"] | None = None
    worktreePath: str | None = None
    resultBranch: str | None = None
    resultCommit: str | None = None
    resultPatch: str | None = None
    dirtyNotCarried: int | None = None
    mergeCommit: str | None = None
    workPool: str | None = None
    repoUrl: str | None = None
    ref: str | None = None
    remoteCommit: str | None = None
    resultPushed: bool | None = None
    pushError: str | None = None
    targetTests: list[str] | None = Field(None, description="tests the work must make pass (targetTests)")
    holdoutCount: int | None = Field(None, description="how many holdout checks the task has (never the checks)")
    testIntegrity: str | None = Field(None, description="the latest report's integrity policy: protect | "
                                                        "allow-test-edits | off")
    unsupportedClaims: list[UnsupportedClaim] | None = Field(
        None, description="the latest report's claims of the agent that the measurements do not support")
    idempotencyReplay: Literal["hit", "in_progress"] | None = None


class RunTaskOutput(TaskMeta):
    """run_task: the new (or replayed) task."""

    projectActiveTask: ActiveTask | None = None


class QueryTaskOutput(TaskMeta):
    """query_task: the task and its recent semantic events."""

    recentEvents: list[TaskEvent] | None = None


class ManageTaskOutput(TaskMeta):
    """manage_task: the task after the action."""

    merge: Merge | None = None


class VerifyTaskOutput(TaskMeta):
    """verify_task: the task's (or the vfy_ record's) meta with the verification's id."""

    verifyId: str | None = None


class WaitTaskOutput(TaskMeta):
    """wait_task: the task that stopped (or the single task waited for)."""

    waitSettled: bool | None = None
    waitedMs: int | None = None
    skippedRecords: list[str] | None = Field(None, description="damaged records not waited for")
    serviceNotReady: bool | None = Field(None, description="true when the wait timed out before any state could "
                                                           "be read from the service (no status yet)")


class ProfileInfo(_Open):
    """One agent of ``query_info(type="profiles")``."""

    id: str
    available: bool | None = None
    driver: str | None = None
    status: str | None = None
    source: str | None = None
    version: str | None = None
    message: str | None = None


class ReportInfo(BaseModel):
    """The acceptance report of ``query_info(type="report")``."""

    model_config = ConfigDict(extra="forbid")

    round: int
    md: str
    json_: str | None = Field(None, alias="json")
    passed: bool | None = None
    blocked: bool | None = None
    truncated: bool = False


class TaskRow(TaskMeta):
    """One task of a list (its meta block; never an error)."""

    error: None = Field(None, exclude=True)


class QueryInfoOutput(_Base):
    """query_info: ``tasks`` (type=tasks), ``profiles`` (type=profiles) or ``report`` (type=report)."""

    tasks: list[TaskRow] | None = None
    skippedRecords: int | None = Field(None, description="damaged task records left out of the list")
    profiles: list[ProfileInfo] | None = None
    checks: list[Any] | None = None
    taskId: str | None = None
    status: Status | None = None
    report: ReportInfo | None = None


class BaselineEntry(_Open):
    """One image of a baseline candidate."""

    target: str
    digest: str


class PrepareBaselineOutput(_Base):
    """prepare_visual_baseline (docs/visual.md §7)."""

    candidateId: str | None = None
    digest: str | None = None
    preview: str | None = None
    entries: list[BaselineEntry] | None = None


class ApproveBaselineOutput(_Base):
    """approve_visual_baseline (docs/visual.md §7)."""

    approvedAt: str | None = None
    targets: list[str] | None = None


OUTPUT_MODELS: dict[str, type[BaseModel]] = {
    "prepare_visual_baseline": PrepareBaselineOutput,
    "approve_visual_baseline": ApproveBaselineOutput,
    "run_task": RunTaskOutput,
    "query_task": QueryTaskOutput,
    "manage_task": ManageTaskOutput,
    "verify_task": VerifyTaskOutput,
    "query_info": QueryInfoOutput,
    "wait_task": WaitTaskOutput,
}
"""Tool name → the model of its ``structuredContent``."""


class _Plain(GenerateJsonSchema):
    """No titles (the descriptions say it)."""

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False


def _inline(node: Any, defs: dict[str, Any], top: bool = True) -> Any:
    """Refs replaced by their definitions (nested models lose their docstring description),
    ``anyOf [X, null]`` written as X with ``"type": [X's type, "null"]``, no titles or null defaults:
    the schemas of all tools stay a few KiB each in ``tools/list``."""
    if isinstance(node, dict):
        if "$ref" in node:
            inner = _inline(defs[node["$ref"].rsplit("/", 1)[-1]], defs, top=False)
            inner.pop("description", None)
            return {**inner, **{k: v for k, v in node.items() if k == "description"}}
        branches = node.get("anyOf")
        if isinstance(branches, list) and len(branches) == 2 and {"type": "null"} in branches:
            other = _inline(next(b for b in branches if b != {"type": "null"}), defs, top=False)
            if isinstance(other.get("type"), str):
                rest = {k: _inline(v, defs, top=False) for k, v in node.items() if k not in ("anyOf", "default", "title")}
                out = {**other, **rest, "type": [other["type"], "null"]}
                if "enum" in out:
                    out["enum"] = [*out["enum"], None]
                return out
        return {k: _inline(v, defs, top=False) for k, v in node.items() if k not in ("$defs", "title")
                and not (k == "default" and v is None) and not (k == "description" and top)}
    if isinstance(node, list):
        return [_inline(v, defs, top=False) for v in node]
    return node


def _open_up(node: Any) -> Any:
    """Every ``additionalProperties: false`` removed (the published, forward-compatible form)."""
    if isinstance(node, dict):
        return {k: _open_up(v) for k, v in node.items() if not (k == "additionalProperties" and v is False)}
    if isinstance(node, list):
        return [_open_up(v) for v in node]
    return node


def output_schema(tool: str, strict: bool = False) -> dict[str, Any]:
    """The JSON Schema of ``tool``'s ``structuredContent`` (an object schema, refs inlined).

    Args:
        tool: a tool name of :data:`OUTPUT_MODELS`.
        strict: keep ``additionalProperties: false`` on the models that forbid extra keys (tests
            use it to find a key the code emits but no model declares).

    Raises:
        KeyError: an unknown tool.
    """
    return json.loads(_schema_text(tool, strict))  # a fresh copy: callers may change it


@functools.cache
def _schema_text(tool: str, strict: bool) -> str:
    """The schema as JSON text, generated once per process (pydantic takes ≈10 ms a model)."""
    raw = OUTPUT_MODELS[tool].model_json_schema(by_alias=True, schema_generator=_Plain)
    schema = _inline(raw, raw.get("$defs", {}))
    schema = schema if strict else _open_up(schema)
    schema["type"] = "object"
    return json.dumps(schema)


def report_meta(task_id: str, md_path: Any, truncated: bool = False) -> dict[str, Any]:
    """The ``structuredContent`` of ``query_info(type="report")``: the round, both paths and the
    verdict read from the round's JSON report (``passed``/``blocked`` absent when it is unreadable).

    Args:
        task_id: the task (or vfy_ record) id. md_path: ``<task dir>/report-<round>.md`` (a Path).
        truncated: the Markdown in the text was cut at the reply limit.
    """
    from ..core.files import read_json_safe

    json_path = md_path.with_suffix(".json")
    data = read_json_safe(str(json_path)) if json_path.is_file() else None
    report: dict[str, Any] = {"round": int(md_path.stem.split("-")[1]), "md": str(md_path), "truncated": truncated}
    if isinstance(data, dict):
        report.update(json=str(json_path), passed=bool(data.get("passed")), blocked=bool(data.get("blockingIssues")))
    return {"ok": True, "taskId": task_id, "message": f"report-{report['round']}", "report": report}


def conform(tool: str, content: dict[str, Any], limit: int = 50) -> tuple[dict[str, Any], list[str]]:
    """``content`` made to fit ``tool``'s output model: a value of the wrong type — a hand-edited or
    damaged ``task.json`` whose ``diffstat`` is an object, say — is left out and named in
    ``damagedFields`` (dotted paths: ``diffstat``, ``tasks.3.round``), so a host that validates
    results still gets the rest. Keys no model declares are kept (the published schemas allow them).

    Returns:
        ``(content, dropped paths)``; ``content`` is returned unchanged when it already fits.
    """
    import copy

    from pydantic import ValidationError

    model = OUTPUT_MODELS.get(tool)
    if model is None:
        return content, []
    fixed = content
    dropped: list[str] = []
    for _ in range(limit):
        try:
            model.model_validate(fixed)
            break
        except ValidationError as exc:
            paths = {p for p in (_drop_path(model, e["loc"]) for e in exc.errors() if e["type"] != "extra_forbidden") if p}
            if not paths:
                break
            if fixed is content:
                fixed = copy.deepcopy(content)
            for path in sorted(paths, key=len, reverse=True):
                _remove(fixed, path)
                dropped.append(".".join(str(p) for p in path))
    if dropped:
        fixed["damagedFields"] = sorted(set(dropped) | set(fixed.get("damagedFields") or []))
    return fixed, dropped


def _row_model(model: type[BaseModel], name: str) -> type[BaseModel] | None:
    """The item model of ``model``'s field ``name`` when it is a list of models, else None."""
    import typing

    field = model.model_fields.get(name)
    if field is None:
        return None
    for arg in typing.get_args(field.annotation) or (field.annotation,):
        if typing.get_origin(arg) is list:
            (item,) = typing.get_args(arg)
            if isinstance(item, type) and issubclass(item, BaseModel):
                return item
    return None


def _drop_path(model: type[BaseModel], loc: tuple[Any, ...]) -> tuple[Any, ...] | None:
    """What to leave out for an error at ``loc``: a row's field (``tasks``, 3, ``round``) when the
    error is inside a list of models, else the top-level field."""
    if not loc or not isinstance(loc[0], str):
        return None
    if _row_model(model, loc[0]) is not None and len(loc) >= 3 and isinstance(loc[1], int) and isinstance(loc[2], str):
        return tuple(loc[:3])
    return (loc[0],)


def _remove(content: dict[str, Any], path: tuple[Any, ...]) -> None:
    node: Any = content
    for part in path[:-1]:
        try:
            node = node[part]
        except (KeyError, IndexError, TypeError):
            return
    if isinstance(node, dict):
        node.pop(path[-1], None)


def fit_output(tool: str, result: Any) -> Any:
    """``result`` (a CallToolResult) with its structuredContent — and the meta block of its text,
    which mirrors it — passed through :func:`conform`; errors and fitting results unchanged."""
    from .format import META_FENCE, ok_result

    content = result.structured_content
    if result.is_error or not isinstance(content, dict):
        return result
    fixed, dropped = conform(tool, content)
    if not dropped:
        return result
    text = result.content[0].text if result.content else ""
    body = text.split(f"\n{META_FENCE}\n", 1)[0]
    return ok_result(body, fixed)
