"""Tool definitions: names, plain JSON Schema inputSchemas, annotations and ``_meta`` (docs/tools.md §1).

Input schemas are plain JSON Schema: optional fields are simply not ``required`` (never an
``anyOf`` with ``null``, which some hosts render as an empty parameter list). Cross-field rules
(branch whitelists, exactly-one-of) live in the handlers. The wire form of the whole list is
pinned by ``tests/snapshots/list_tools.json``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..core.settings import MAX_TIMEOUT_MS
from .integrity_args import HOLDOUT_CHECKS_SCHEMA, TARGET_TESTS_SCHEMA

STR1: dict[str, Any] = {"type": "string", "minLength": 1}
ID: dict[str, Any] = {"type": "string", "minLength": 1, "maxLength": 128}
"""An identifier (task id, agent id): ids are short; a 10 MB one was echoed into a 60 MB reply."""
TEXT: dict[str, Any] = {"type": "string", "maxLength": 100000}
"""Free text (a brief, context, feedback, a message): at most 100000 characters."""
PATH: dict[str, Any] = {"type": "string", "minLength": 1, "maxLength": 4096}
"""A file-system path (PATH_MAX is 4096 bytes)."""
MAX_CHECKS = 100
"""At most this many checks in ``acceptanceOverride.checks`` or ``extraChecks`` (acceptance.config.MAX_CHECKS)."""

ACCEPTANCE_CHECK: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {**STR1, "maxLength": 200},
        "cmd": {
            "oneOf": [{**STR1, "maxLength": 100000},
                      {"type": "array", "items": {**STR1, "maxLength": 100000}, "minItems": 1, "maxItems": 4096}],
            "description": "argv array (preferred) or a string split by the splitCmd rules; never run through a shell",
        },
        "timeoutMs": {"type": "integer", "exclusiveMinimum": 0},
        "optional": {"type": "boolean"},
    },
    "required": ["name", "cmd"],
}

ACCEPTANCE_OVERRIDE: dict[str, Any] = {
    "type": "object",
    "description": "Task-level acceptance override (same format as .tianshu-mcp/acceptance.json); replaces fields wholesale.",
    "properties": {
        "checks": {"type": "array", "items": ACCEPTANCE_CHECK, "maxItems": MAX_CHECKS},
        "visual": {"type": "object"},
        "requireChanges": {"type": "boolean"},
        "verifyConcurrency": {"type": "number"},
    },
}

IDEMPOTENCY_KEY: dict[str, Any] = {
    "type": "string",
    "minLength": 1,
    "maxLength": 128,
    "description": "Same key + same arguments returns the original task instead of dispatching again (24 h).",
}


@dataclass(frozen=True)
class ToolDef:
    """One tool: ``name``, ``description``, ``input_schema``, ``capability`` (read|write|execute),
    ``require_approval`` and the destructive/open-world/idempotent hints (docs/tools.md §1.1)."""

    name: str
    description: str
    input_schema: dict[str, Any]
    capability: str
    require_approval: bool
    destructive: bool
    open_world: bool
    idempotent: bool

    def annotations(self) -> dict[str, Any]:
        """MCP annotations; readOnlyHint = (capability == "read"); all hints explicit booleans."""
        return {
            "title": self.name,
            "readOnlyHint": self.capability == "read",
            "destructiveHint": self.destructive,
            "idempotentHint": self.idempotent,
            "openWorldHint": self.open_world,
        }

    def meta(self) -> dict[str, Any]:
        """Tool ``_meta``: ``{requireApproval, capability}``."""
        return {"requireApproval": self.require_approval, "capability": self.capability}


RUN_TASK = ToolDef(
    name="run_task",
    description=(
        "Dispatch a coding task to an external agent on a git project. Returns a taskId at once; the task "
        "runs as a Prefect flow run (baseline -> agent -> acceptance -> automatic rework). Poll with "
        "query_task or wait_task (suggested every 5-10 s). Optional targetTests (tests the work must make pass) "
        "and holdoutChecks (checks the agent never sees; only their count is shown)."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "projectPath": {**PATH, "description": "Absolute path of the project (a git repository)."},
            "task": {**STR1, "maxLength": 100000, "description": "The brief for the agent (at most 100000 characters)."},
            "agentId": {**ID, "description": "Agent profile id (agent-profiles.json); default \"codex\"."},
            "model": {**STR1, "maxLength": 256, "description": "Model hint: a desktop agent picks it in its model menu "
                      "(ZCode: provider/model); CLI and ACP agents run the model their profile sets."},
            "reasoningLevel": {"type": "string", "enum": ["低", "中", "高", "low", "medium", "high", "max", "极高", "xhigh", "最大", "关闭思考", "on", "off"],
                               "description": "Desktop agents' reasoning level; 极高/xhigh/最大/关闭思考 are Qoder CN only."},
            "modelSource": {"type": "string", "enum": ["default", "custom"], "description": "Qoder CN (desktop) only."},
            "mode": {"type": "string", "enum": ["Work", "Code", "Design"],
                     "description": "TraeWork's mode; refused by the other desktop agents, ignored by CLI and ACP agents."},
            "planDoc": {**STR1, **TEXT},
            "designSystem": {**STR1, **TEXT},
            "designDirection": {**STR1, **TEXT, "description": "Open Design (desktop) only, and required there."},
            "contextWindow": {**STR1, **TEXT, "description": "MiniMax Code (desktop) only."},
            "context": {"type": "string", "maxLength": 100000, "description": "Extra context or constraints appended to the brief (at most 100000 characters)."},
            "autoVerify": {"type": "boolean", "description": "Verify after each agent round (default true)."},
            "autoFixRounds": {"type": "integer", "minimum": 0, "maximum": 10, "description": "Automatic rework rounds after a failed verification (default 0)."},
            "allowCreateProject": {"type": "boolean", "description": "ZCode (desktop) only."},
            "taskTimeoutMs": {"type": "integer", "exclusiveMinimum": 0, "maximum": MAX_TIMEOUT_MS,
                              "description": "Agent wall-clock limit per round, ms (at most 24 h)."},
            "idempotencyKey": IDEMPOTENCY_KEY,
            "acceptanceOverride": ACCEPTANCE_OVERRIDE,
            "isolation": {"type": "string", "enum": ["inplace", "worktree"],
                          "description": "Where the agent works. inplace (default, or the project's projects.json "
                          "\"isolation\"): the project's own work tree, one task at a time. worktree: a git worktree "
                          "on a new branch tianshu/<taskId> from HEAD (uncommitted changes are not carried over), "
                          "several tasks of one repository at once; the result is that branch plus result.patch, "
                          "merged with manage_task(action=\"merge\")."},
            "repoUrl": {**STR1, "maxLength": 2048, "description": "A git remote (https://, ssh://, user@host:path, "
                        "file:// or a path on the worker's machine) for a worker that cannot see projectPath: the worker "
                        "clones it, works in a worktree from ref and pushes the result branch tianshu/<taskId> back. "
                        "Credentials in the URL are refused; the worker's environment provides them. Default with "
                        "workPool: the projects.json entry's repoUrl, else projectPath's remote 'origin'."},
            "ref": {**STR1, "maxLength": 255, "description": "Branch, tag or commit of repoUrl the task starts from "
                    "(default HEAD: the remote's default branch)."},
            "workPool": {**STR1, "maxLength": 63, "description": "The Prefect work pool whose workers run the task "
                         "(default: the local pool \"tianshu\"). A pool other than the local one makes the task remote "
                         "(repoUrl); it stays queued until a `tianshu-mcp worker --pool <name>` takes it."},
            "dryRun": {"type": "boolean", "description": "Static dry run: report which agent invocation and checks "
                       "would run and what would block the task (dry-run-report-<n>); no agent starts, the project "
                       "is not changed, no round is used."},
            "targetTests": TARGET_TESTS_SCHEMA,
            "holdoutChecks": HOLDOUT_CHECKS_SCHEMA,
        },
        "required": ["task"],
    },
    capability="write", require_approval=True, destructive=False, open_world=True, idempotent=True,
)

QUERY_TASK = ToolDef(
    name="query_task",
    description="Status, last message, agent log tail and recent events of a task.",
    input_schema={
        "type": "object",
        "properties": {
            "taskId": ID,
            "tailLines": {"type": "integer", "exclusiveMinimum": 0, "description": "Agent log lines to show (default 40)."},
            "eventLimit": {"type": "integer", "minimum": 1, "maximum": 50, "description": "Recent events to show (default 10)."},
        },
        "required": ["taskId"],
    },
    capability="read", require_approval=False, destructive=False, open_world=False, idempotent=False,
)

MANAGE_TASK = ToolDef(
    name="manage_task",
    description=(
        "Task lifecycle: action=cancel (kills the agent's process tree), action=continue (resume a "
        "needs_user task with message), action=rework (re-queue a finished task with feedback), "
        "action=merge (merge a succeeded worktree task's branch into the project)."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "taskId": ID,
            "action": {"type": "string", "enum": ["cancel", "continue", "rework", "merge"]},
            "reason": TEXT,
            "message": TEXT,
            "feedback": {"type": "string", "maxLength": 100000},
            "repairHint": {"type": "string", "maxLength": 4000},
        },
        "required": ["taskId", "action"],
    },
    capability="write", require_approval=True, destructive=True, open_world=False, idempotent=False,
)

QUERY_INFO = ToolDef(
    name="query_info",
    description="type=tasks: task list (filters projectPath, status, limit); type=report: a round's report markdown; type=profiles: agents and whether they can run.",
    input_schema={
        "type": "object",
        "properties": {
            "type": {"type": "string", "enum": ["tasks", "report", "profiles"]},
            "projectPath": PATH,
            "status": {"type": "string", "maxLength": 64},
            "limit": {"type": "integer", "minimum": 1, "maximum": 200},
            "taskId": ID,
            "round": {"type": "integer", "minimum": 0},
        },
        "required": ["type"],
    },
    capability="read", require_approval=False, destructive=False, open_world=False, idempotent=False,
)

WAIT_TASK = ToolDef(
    name="wait_task",
    description=(
        "Block until a task (taskId) or the first of several (taskIds, 1-20) reaches a stop point "
        "(terminal status or needs_user), or timeoutMs passes (default 50000, max 600000). Read-only."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "taskId": ID,
            "taskIds": {"type": "array", "items": ID, "minItems": 1, "maxItems": 20},
            "timeoutMs": {"type": "integer", "exclusiveMinimum": 0},
        },
    },
    capability="read", require_approval=False, destructive=False, open_world=False, idempotent=False,
)

VERIFY_TASK = ToolDef(
    name="verify_task",
    description=(
        "Run one acceptance round now, without an agent: by taskId (against the task's pre-work baseline; "
        "writes the next report round, never overwrites one) or by projectPath (a vfy_ record). Optional "
        "baselineRef (a git ref or a task id), extraChecks with checksMode append|replace, acceptanceOverride, "
        "targetTests (by taskId: default the task's), holdoutChecks (added to the task's and the project's). "
        "Runs as a Prefect flow run on the project's queue; waits up to ~45 s, else returns in_progress with "
        "an id to poll with wait_task/query_task. Never modifies sources."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "taskId": {"type": "string", "maxLength": 128, "description": "Verify this task (wins over projectPath)."},
            "projectPath": {**PATH, "description": "Absolute path of a project to verify as it is now."},
            "extraChecks": {"type": "array", "items": ACCEPTANCE_CHECK, "maxItems": MAX_CHECKS},
            "checksMode": {"type": "string", "enum": ["append", "replace"]},
            "baselineRef": {**STR1, "maxLength": 1024, "description": "A git ref (commit, branch, tag) or a task id whose baseline to use."},
            "idempotencyKey": IDEMPOTENCY_KEY,
            "acceptanceOverride": ACCEPTANCE_OVERRIDE,
            "targetTests": TARGET_TESTS_SCHEMA,
            "holdoutChecks": HOLDOUT_CHECKS_SCHEMA,
        },
    },
    capability="execute", require_approval=False, destructive=False, open_world=False, idempotent=True,
)

_IDS: dict[str, Any] = {"type": "array", "minItems": 1, "maxItems": 100,
                        "items": {"type": "string", "minLength": 1, "maxLength": 100}}

PREPARE_VISUAL_BASELINE = ToolDef(
    name="prepare_visual_baseline",
    description=(
        "Capture (or import) screenshots of the project's visual pages into a baseline candidate for review. "
        "Writes nothing into the project: returns candidateId, its sha256 digest and an offline preview.html. "
        "A person reviews the preview, then calls approve_visual_baseline."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "projectPath": {**PATH, "description": "Absolute path of the project (its .tianshu-mcp/acceptance.json has an enabled visual block)."},
            "caseIds": {**_IDS, "description": "Pages to include (default: every pixel page)."},
            "viewportIds": {**_IDS, "description": "Viewports to include (default: each page's viewports)."},
            "imports": {"type": "array", "minItems": 1, "maxItems": 100, "items": {
                "type": "object", "additionalProperties": False, "required": ["caseId", "viewportId", "file"],
                "properties": {"caseId": {"type": "string", "minLength": 1, "maxLength": 100},
                               "viewportId": {"type": "string", "minLength": 1, "maxLength": 100},
                               "file": {"type": "string", "minLength": 1, "maxLength": 4096,
                                        "description": "Project-relative image file used instead of a capture."}}}},
        },
        "required": ["projectPath"],
        "additionalProperties": False,
    },
    capability="write", require_approval=True, destructive=False, open_world=False, idempotent=False,
)

APPROVE_VISUAL_BASELINE = ToolDef(
    name="approve_visual_baseline",
    description=(
        "Approve a reviewed baseline candidate: checks its digest, writes the PNGs and their manifests "
        "(with the approval note) into the project's baseline folder. With taskId, also unblocks that "
        "needs_attention task's visual snapshot (rework it to re-verify)."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "candidateId": {"type": "string", "minLength": 36, "maxLength": 36,
                            "description": "The candidate's UUID (from prepare_visual_baseline); checked by the handler."},
            "expectedDigest": {"type": "string", "pattern": "^[a-f0-9]{64}$",
                               "description": "The digest prepare_visual_baseline returned."},
            "approvalNote": {"type": "string", "minLength": 1, "maxLength": 2000, "pattern": "\\S",
                             "description": "Why these screenshots are right (recorded in the manifests)."},
            "taskId": {"type": "string", "pattern": "^tsk_[A-Za-z0-9_-]+$", "maxLength": 128},
        },
        "required": ["candidateId", "expectedDigest", "approvalNote"],
        "additionalProperties": False,
    },
    capability="write", require_approval=True, destructive=True, open_world=False, idempotent=False,
)


# tools/list order (docs/tools.md §1)
TOOL_DEFS: tuple[ToolDef, ...] = (PREPARE_VISUAL_BASELINE, APPROVE_VISUAL_BASELINE, RUN_TASK, QUERY_TASK, MANAGE_TASK,
                                  VERIFY_TASK, QUERY_INFO, WAIT_TASK)
TOOLS_BY_NAME: dict[str, ToolDef] = {t.name: t for t in TOOL_DEFS}
