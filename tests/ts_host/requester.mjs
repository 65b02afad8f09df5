#!/usr/bin/env node
// A TypeScript-SDK MCP host for tests/test_ts_host.py: @modelcontextprotocol/client (2.x) over stdio and
// the requester lifecycle of @modelcontextprotocol/ext-tasks (createTaskSessionFromClient, callTool,
// settle, cancel, task controllers, onInputRequest) against tianshu-mcp's tasks extension
// (io.modelcontextprotocol/tasks, SEP-2663, revision 2026-07-28; server side mcp_server/tasks_ext.py).
//
// Usage: node requester.mjs --server CMD [--scenario run|cancel|input|legacy|progress] --args JSON
//                           [--wait-file PATH] [--answer TEXT] [--timeout-s N]
//                           [--gate PATH] [--quiet-ms N] [--era legacy|modern]
// The server runs with this process's environment. Prints ONE JSON line on stdout (what it observed);
// diagnostics go to stderr. Exit code 0 when the scenario ran to its end (the JSON says what happened),
// 1 on an error (the JSON then carries "error").
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { performance } from "node:perf_hooks";
import { setTimeout as sleep } from "node:timers/promises";
import { parseArgs } from "node:util";

import { Client } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import {
  createApplicationInputHandler,
  createTaskSessionFromClient,
  resultFromTaskOutcome,
} from "@modelcontextprotocol/ext-tasks/client";

const EXTENSION_ID = "io.modelcontextprotocol/tasks";
const { values: opts } = parseArgs({
  options: {
    server: { type: "string" },
    scenario: { type: "string", default: "run" },
    args: { type: "string", default: "{}" },
    "wait-file": { type: "string" },
    answer: { type: "string", default: "yes" },
    "timeout-s": { type: "string", default: "300" },
    gate: { type: "string" },
    "quiet-ms": { type: "string", default: "2500" },
    era: { type: "string", default: "legacy" },
  },
});
if (!opts.server) throw new Error("--server CMD is required");
const toolArgs = JSON.parse(opts.args);
const deadline = AbortSignal.timeout(Number(opts["timeout-s"]) * 1000);
const clientInfo = { name: "tianshu-ts-host", version: "0.1.0" };
// form elicitation: the extension carries the agent's questions as elicitation/create input requests
const clientCapabilities = { elicitation: { form: {} } };
const out = { scenario: opts.scenario, wire: [] };
const ANY_JSON = { "~standard": { version: 1, vendor: "tianshu-ts-host", validate: (value) => ({ value }) } };

/**
 * The host-owned request coordinator ext-tasks needs for a 2026-07-28 Tasks server ("rawDispatch": the
 * SDK's wire codecs reject CreateTaskResult on tools/call). It shares the SDK client's connection: own
 * string ids ("ext-tasks:N", the SDK's Protocol only issues numeric ids), responses to them are taken off
 * the transport before the SDK sees them, everything else flows on to the SDK untouched.
 */
function rawCoordinator(transport) {
  const pending = new Map();
  let next = 0;
  const sdkOnMessage = transport.onmessage;
  transport.onmessage = (message, extra) => {
    const waiter = message && "id" in message && !("method" in message) ? pending.get(message.id) : undefined;
    if (waiter === undefined) return sdkOnMessage?.(message, extra);
    pending.delete(message.id);
    waiter(message);
  };
  const sdkOnClose = transport.onclose;
  transport.onclose = () => {
    for (const waiter of pending.values()) waiter({ error: { code: -32000, message: "connection closed" } });
    pending.clear();
    sdkOnClose?.();
  };
  return async (request, options = {}) => {
    const id = `ext-tasks:${++next}`;
    const { jsonrpc: _j, id: _i, ...body } = request;
    const answered = new Promise((resolve, reject) => {
      pending.set(id, resolve);
      const signal = options.signal;
      signal?.addEventListener("abort", () => { pending.delete(id); reject(signal.reason); }, { once: true });
    });
    await transport.send({ jsonrpc: "2.0", id, ...body });
    const message = await answered;
    const entry = { method: body.method };
    if (message.error) {
      entry.error = message.error.code;
      out.wire.push(entry);
      return { kind: "error", error: message.error };
    }
    const result = message.result;
    entry.resultType = result?.resultType;
    if (result?.status) entry.status = result.status;
    out.wire.push(entry);
    if (body.method === "tools/call" && out.seed === undefined) out.seed = result;
    return { kind: "result", result };
  };
}

async function connect(modern) {
  const client = new Client(clientInfo, {
    capabilities: clientCapabilities,
    ...(modern ? { versionNegotiation: { mode: "auto" } } : {}),
  });
  const env = Object.fromEntries(Object.entries(process.env).filter(([, v]) => typeof v === "string"));
  const transport = new StdioClientTransport({ command: opts.server, args: [], env, stderr: "inherit" });
  await client.connect(transport, { timeout: 120_000 });
  out.protocolVersion = client.getNegotiatedProtocolVersion();
  out.era = client.getProtocolEra();
  out.serverExtensions = Object.keys(client.getServerCapabilities()?.extensions ?? {});
  return { client, transport };
}

function taskSession(client, transport, { onInputRequest } = {}) {
  const modern = client.getProtocolEra() === "modern";
  const session = createTaskSessionFromClient(client, {
    endpointId: "tianshu-mcp-test",
    ...(onInputRequest ? { onInputRequest } : {}),
    onError: (error) => process.stderr.write(`ext-tasks: ${error.stack ?? error}\n`),
    ...(modern
      ? {
          rawDispatch: rawCoordinator(transport),
          v2RequestFraming: { protocolVersion: client.getNegotiatedProtocolVersion(), clientInfo, clientCapabilities },
        }
      : {}),
  });
  out.capabilities = session.capabilities;
  return session;
}

function summary(result) {
  const sc = result?.structuredContent ?? {};
  return {
    isError: result?.isError ?? false,
    status: sc.status,
    taskId: sc.taskId,
    text: String(result?.content?.[0]?.text ?? "").split("\n")[0],
    structuredContent: sc,
  };
}

/** Follow a task execution with ext-tasks' settle(); the statuses come from its lifecycle events. */
async function follow(execution) {
  out.kind = execution.kind;
  out.statuses = [];
  const { outcome, lastTask } = await execution.settle({
    signal: deadline,
    onEvent: (event) => {
      const status = event.type === "task" ? event.task.status : `outcome:${event.outcome.status}`;
      if (out.statuses.at(-1) !== status) out.statuses.push(status);
    },
  });
  out.outcome = outcome.status;
  out.lastTask = lastTask && { status: lastTask.status, statusMessage: lastTask.statusMessage };
  return outcome;
}

async function waitForFile(path) {
  while (!(existsSync(path) && readFileSync(path, "utf8").trim())) {
    if (deadline.aborted) throw new Error(`timed out waiting for ${path}`);
    await sleep(200);
  }
}

// run_task as a task on a session with `sessionOptions`, followed to completion by the package
async function runFollowed(sessionOptions) {
  const { client, transport } = await connect(true);
  const session = taskSession(client, transport, sessionOptions);
  try {
    const execution = await session.callTool("run_task", toolArgs, { task: { preference: "require" } });
    out.taskId = execution.handle?.taskId;
    const outcome = await follow(execution);
    out.final = summary(resultFromTaskOutcome(outcome));
  } finally {
    await session.close();
    await client.close();
  }
}

/** Every `notifications/progress` on the wire (whichever request it belongs to), with when it arrived (ms). */
function tapProgress(transport) {
  const seen = [];
  const sdkOnMessage = transport.onmessage;
  transport.onmessage = (message, extra) => {
    if (message?.method === "notifications/progress") seen.push({ at: performance.now(), ...message.params });
    return sdkOnMessage?.(message, extra);
  };
  return seen;
}

const RUNNING = /^running: round \d+: agent running$/;

const scenarios = {
  // run_task as a task, followed to completion by the package
  async run() {
    await runFollowed({});
  },
  // tasks/cancel of a running task through the execution, then the server's final state read back
  async cancel() {
    const { client, transport } = await connect(true);
    const session = taskSession(client, transport);
    try {
      const execution = await session.callTool("run_task", toolArgs, { task: { preference: "require" } });
      out.taskId = execution.handle?.taskId;
      if (opts["wait-file"]) await waitForFile(opts["wait-file"]);
      out.beforeCancel = (await session.task(out.taskId).snapshot(deadline)).status;
      await execution.cancel(deadline);
      out.localOutcome = (await execution.settle({ signal: deadline })).outcome.status;
      // a non-owning controller polls the task to its terminal state (cancellation is cooperative)
      const { status, task } = await session.task(out.taskId).result({ signal: deadline });
      out.outcome = status;
      out.lastTask = task && { status: task.status, statusMessage: task.statusMessage };
      await session.cancelTask(out.taskId, deadline); // a final task: acknowledged, nothing changes
      out.afterSecondCancel = (await session.task(out.taskId).snapshot(deadline)).status;
    } finally {
      await session.close();
      await client.close();
    }
  },
  // a needs_user task: the package hands the elicitation to onInputRequest and answers via tasks/update
  async input() {
    out.inputRequests = [];
    const onInputRequest = createApplicationInputHandler({
      elicitation: async (request, context) => {
        out.inputRequests.push({ kind: request.kind, params: request.params, scope: context.scope,
                                 delivery: context.delivery, inputId: context.inputId, taskId: context.taskId });
        return { action: "accept", content: { message: opts.answer } };
      },
      sampling: async () => { throw new Error("no sampling expected"); },
      roots: async () => ({ roots: [] }),
    });
    await runFollowed({ onInputRequest });
  },
  // wait_task with and without RequestOptions.onprogress (which sends a progressToken), and aborted:
  // none without it; an aborted call (notifications/cancelled) stops its notifications; with it they
  // come until the task ends, which it can only after --gate is written: this host writes it once
  // three arrived, one of them saying the agent runs
  async progress() {
    const { client, transport } = await connect(opts.era === "modern");
    const quietMs = Number(opts["quiet-ms"]);
    try {
      const wire = tapProgress(transport);
      const submitted = summary(await client.callTool({ name: "run_task", arguments: toolArgs }));
      out.submitted = submitted;
      const taskId = submitted.taskId;
      // 1: no onprogress, so no token: a wait of several intervals on a task that cannot end yet
      out.quiet = summary(await client.callTool({ name: "wait_task", arguments: { taskId, timeoutMs: quietMs } }));
      out.quietProgress = wire.length;
      // 2: onprogress, aborted after two notifications; then a wait of several intervals without a token
      const abort = new AbortController();
      out.abortedNotes = [];
      try {
        await client.callTool({ name: "wait_task", arguments: { taskId, timeoutMs: 600000 } }, {
          timeout: 300_000,
          signal: abort.signal,
          onprogress: (note) => {
            out.abortedNotes.push(note);
            if (out.abortedNotes.length === 2) abort.abort(new Error("the host gave up"));
          },
        });
        out.aborted = "answered";
      } catch (error) {
        out.aborted = String(error?.message ?? error);
      }
      const abortedAt = performance.now();
      const abortedToken = wire.at(-1)?.progressToken;
      out.afterAbort = summary(await client.callTool({ name: "wait_task", arguments: { taskId, timeoutMs: quietMs } }));
      out.lateProgress = wire.filter((n) => n.at > abortedAt && n.progressToken === abortedToken).length;
      // 3: onprogress until the task ends
      out.notes = [];
      const done = await client.callTool({ name: "wait_task", arguments: { taskId, timeoutMs: 300000 } }, {
        timeout: 360_000,
        resetTimeoutOnProgress: true,
        onprogress: (note) => {
          out.notes.push(note);
          if (out.notes.length >= 3 && out.notes.some((n) => RUNNING.test(n.message ?? ""))) writeFileSync(opts.gate, "open");
        },
      });
      out.final = summary(done);
      out.wireProgress = wire.length;
      out.protocolVersion = client.getNegotiatedProtocolVersion();
    } finally {
      await client.close();
    }
  },
  // a 2025-era host: no extension, the same ext-tasks call is immediate and classic (taskId + wait_task)
  async legacy() {
    const { client, transport } = await connect(false);
    const session = taskSession(client, transport);
    try {
      const execution = await session.callTool("run_task", toolArgs);
      out.kind = execution.kind;
      const submitted = summary(resultFromTaskOutcome((await execution.settle({ signal: deadline })).outcome));
      out.submitted = submitted;
      try {
        await client.request({ method: "tasks/get", params: { taskId: submitted.taskId } }, ANY_JSON);
        out.tasksGet = "answered";
      } catch (error) {
        out.tasksGet = error.code ?? String(error);
      }
      const done = await client.callTool({ name: "wait_task", arguments: { taskId: submitted.taskId, timeoutMs: 180000 } },
                                         { timeout: 240_000 });
      out.final = summary(done);
    } finally {
      await session.close();
      await client.close();
    }
  },
};

const scenario = scenarios[opts.scenario];
if (!scenario) throw new Error(`unknown --scenario ${opts.scenario}`);
try {
  await scenario();
  process.stdout.write(JSON.stringify(out) + "\n");
} catch (error) {
  out.error = String(error?.stack ?? error);
  if (error?.cause) out.cause = String(error.cause?.stack ?? error.cause);
  process.stdout.write(JSON.stringify(out) + "\n");
  process.exitCode = 1;
}
