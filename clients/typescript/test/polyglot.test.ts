// examples/polyglot end to end, as its README runs it: the platform with the app (started by `npm test`), the
// example's TypeScript worker as its own process, an event in, and the workflow's object out, its run and its
// batch's outcome as the platform lists them.
import assert from "node:assert/strict";
import { ChildProcess, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { TEMPORAL, client, eventually } from "./helpers";
import { REPO } from "./with-platform";

const WORKER = join(REPO, "examples", "polyglot", "worker", "lib", "worker.js");
const skip = !TEMPORAL
  ? "needs ORCHESTRATOR_TEMPORAL_ADDRESS (a platform `npm test` started, with examples.polyglot.app)"
  : !existsSync(WORKER)
    ? "the example's worker is not built: `npm ci && npm run build` in examples/polyglot/worker"
    : false;
let worker: ChildProcess | undefined;

before(async () => {
  if (skip) return;
  worker = spawn(process.execPath, [WORKER], { env: { ...process.env }, stdio: ["ignore", "pipe", "pipe"] });
  const said: string[] = [];
  worker.stderr!.on("data", (chunk: Buffer) => said.push(chunk.toString()));
  await new Promise<void>((ready, fail) => {
    const timer = setTimeout(() => fail(new Error(`the example's worker did not start:\n${said.join("")}`)), 60_000);
    worker!.once("exit", (code) => fail(new Error(`the example's worker exited (${code}):\n${said.join("")}`)));
    worker!.stdout!.on("data", (chunk: Buffer) => {
      if (chunk.toString().includes("polyglot worker: polling")) {
        clearTimeout(timer);
        worker!.removeAllListeners("exit");
        ready();
      }
    });
  });
});

after(async () => {
  if (worker && worker.exitCode === null) {
    const exited = new Promise((done) => worker!.once("exit", done));
    worker.kill("SIGTERM");
    await exited;
  }
});

test("orders in, the TypeScript workflow's summary out, its run and outcome listed", { skip }, async (t) => {
  const api = client();
  const { session } = await api.openSession({ alias: `shop/${Date.now()}` });
  const first = await api.emitEvent(session.id, "order.placed", { order: "A-1", amount: 12.5 });
  const second = await api.emitEvent(session.id, "order.placed", { order: "A-2", amount: 30 });
  const summary = await eventually(async () => {
    const reply = await api.command({ command: "read_object", session_id: session.id, alias: "summaries/orders" });
    return reply.status === "success" && reply.object.value.orders.length === 2 && reply.object;
  }, "the workflow's summary", 60_000);
  t.diagnostic(`read_object summaries/orders: ${JSON.stringify(summary)}`);
  assert.equal(summary.value.total, 42.5);
  assert.deepEqual(summary.value.orders, ["A-1", "A-2"]);
  assert.deepEqual(summary.value.batch, { first_id: first.event_id, last_id: second.event_id, retry: 0 });
  const run = await eventually(async () => {
    const { executions } = await api.listExecutions(session.id, { listener: "order_summary" });
    return executions.length === 1 && executions[0].status === "completed" && executions[0];
  }, "the run's end", 30_000);
  t.diagnostic(`list_executions: ${JSON.stringify(run)}`);
  assert.equal(run.workflow, "summarizeOrders");
  assert.equal(run.error, null, "the run reported its own end");
  const { listeners } = await api.listSessionListeners(session.id);
  const listener = listeners.find((l) => l.name === "order_summary");
  assert.ok(listener, "the listener is in the session");
  t.diagnostic(`list_session_listeners order_summary: counts ${JSON.stringify(listener.counts)}, outcomes ${JSON.stringify(listener.recent_outcomes)}`);
  assert.deepEqual(listener.recent_outcomes.map((o) => o.status), ["success"]);
  assert.deepEqual(listener.warnings, []);
});
