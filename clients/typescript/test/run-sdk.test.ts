// The run-side SDK from a TypeScript worker on a task queue of its own: a listener's run there reads and writes its
// session through `orchestrator.session` on the platform's queue, with `owns` and `if_rev` held, writes that a
// repeated batch finds rather than makes again, and its end reported at once by the interceptors module.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { DefaultLogger, NativeConnection, Runtime, Worker } from "@temporalio/worker";
import { NAMESPACE, TEMPORAL, client, eventually, fresh } from "./helpers";

const skip = TEMPORAL ? false : "needs ORCHESTRATOR_TEMPORAL_ADDRESS (a platform `npm test` started)";
const queue = fresh("ts-sdk");
let worker: Worker | undefined;
let running: Promise<void> | undefined;
let connection: NativeConnection | undefined;

before(async () => {
  if (!TEMPORAL) return;
  Runtime.install({ logger: new DefaultLogger("ERROR") });
  connection = await NativeConnection.connect({ address: TEMPORAL });
  worker = await Worker.create({
    connection,
    namespace: NAMESPACE,
    taskQueue: queue,
    workflowsPath: require.resolve("./workflows"),
    interceptors: { workflowModules: [require.resolve("../src/workflow/interceptors")] },
  });
  running = worker.run();
});

after(async () => {
  worker?.shutdown();
  await running;
  await connection?.close();
});

/** A listener's failed run and its repeat, once both ended, by their batch's retry number. */
async function failedAndRepeated(api: ReturnType<typeof client>, sessionId: string, name: string): Promise<any[]> {
  const runs = await eventually(async () => {
    const { executions } = await api.listExecutions(sessionId, { listener: name });
    return executions.length === 2 && executions.every((e) => e.status !== "running") && executions;
  }, "the failed run and its repeat, ended", 60_000);
  return [...runs].sort((a: any, b: any) => a.batch.retry - b.batch.retry);
}

test("a run on a queue of its own reads and writes its session, once across a repeated batch", { skip }, async () => {
  const api = client();
  const name = fresh("ts_sdk");
  await api.saveListener({
    name,
    filter: { types: ["object.written"], aliases: ["in/**"] },
    batch: { window_seconds: 0.2 },
    action: { type: "workflow", workflow: "sdkWriter", task_queue: queue, input: { fail_first: true } },
    retry: { attempts: 1, delay_seconds: 0 },
    owns: ["out/**"],
  });
  try {
    const { session } = await api.openSession();
    const wrote = await api.writeObject(session.id, "in/1", { type: "in" });
    const byRetry = await failedAndRepeated(api, session.id, name);
    assert.deepEqual(byRetry.map((r) => r.status), ["failed", "completed"]);
    assert.match(byRetry[0].error, /asked to fail its first attempt/, "the failed run reported its error");
    assert.equal(byRetry[1].error, null, "the repeat reported its own end (the sweep would say it did not)");
    const summary = (await api.readObject(session.id, "out/summary")).object;
    assert.equal(summary.rev, 1, "the repeat's write found the first one's by its key instead of writing again");
    assert.deepEqual(summary.value, { type: "summary", aliases: ["in/1"] });
    const items = await api.listThreadItems(session.id, "out/thread");
    assert.equal(items.items.length, 1);
    const notes = (await api.readObject(session.id, "out/notes")).object.value;
    assert.deepEqual(notes, {
      type: "notes",
      missing: null,
      conflict: "rev_conflict",
      denied: "access_denied",
      event_ids: [wrote.event_id],
      paged: { ids: [wrote.event_id], last_id: wrote.event_id },
      timer: ["out/tick", "access_denied"],
      platform_task_queue: process.env.ORCHESTRATOR_TASK_QUEUE || "orchestrator",
    });
    const { events } = await api.listSessionEvents(session.id, { types: ["object.written"] });
    const own = events.filter((e) => e.alias === "out/summary");
    assert.equal(own.length, 1);
    assert.equal(own[0].source.listener, name, "its write is the run's: it never wakes its own listener");
    assert.equal(own[0].depth, 1);
  } finally {
    await api.deleteListener(name);
  }
});

async function waiter(timeout: number, extra: Record<string, unknown> = {}) {
  const api = client();
  const name = fresh("ts_wait");
  await api.saveListener({
    name,
    filter: { types: ["object.written"], aliases: ["ask/**"] },
    batch: { window_seconds: 0 },
    action: { type: "workflow", workflow: "sdkWaiter", task_queue: queue, input: { timeout } },
    ...extra,
  });
  const { session } = await api.openSession();
  await api.writeObject(session.id, "ask/1", { type: "ask" });
  await eventually(async () => {
    const { executions } = await api.listExecutions(session.id, { listener: name });
    return executions.length === 1 && executions[0].status === "running";
  }, "the waiting run", 30_000);
  const ended = () =>
    eventually(async () => {
      const { executions } = await api.listExecutions(session.id, { listener: name });
      return executions.length === 1 && executions[0].status !== "running" && executions[0];
    }, "the run's end", 30_000);
  return { api, name, session, ended };
}

test("a run waits for the events it needs, and hears them by a signal", { skip }, async () => {
  const { api, name, session, ended } = await waiter(30);
  try {
    await new Promise((done) => setTimeout(done, 300));
    await api.writeObject(session.id, "reply/1", { type: "reply" });
    assert.equal((await ended()).status, "completed");
    const heard = (await api.readObject(session.id, "out/heard")).object.value;
    assert.deepEqual(heard, { type: "heard", matched: 0, aliases: ["reply/1"] });
  } finally {
    await api.deleteListener(name);
  }
});

test("a wait that times out answers no events", { skip }, async () => {
  const { api, name, session, ended } = await waiter(0.5);
  try {
    assert.equal((await ended()).status, "completed");
    const heard = (await api.readObject(session.id, "out/heard")).object.value;
    assert.deepEqual(heard, { type: "heard", matched: null, aliases: [] });
  } finally {
    await api.deleteListener(name);
  }
});

test("a run cancelled while it waits (cancel_on) reports its end as cancelled", { skip }, async () => {
  const cancelOn = { cancel_on: [{ types: ["object.written"], aliases: ["stop/**"], grace_seconds: 10 }] };
  const { api, name, session, ended } = await waiter(60, cancelOn);
  try {
    await api.writeObject(session.id, "stop/1", { type: "stop" });
    const run = await ended();
    assert.equal(run.status, "cancelled", JSON.stringify(run));
    await assert.rejects(api.readObject(session.id, "out/heard"));
  } finally {
    await api.deleteListener(name);
  }
});

test("a run whose code throws a plain error ends failed, and its listener's retry repeats it", { skip }, async () => {
  const api = client();
  const name = fresh("ts_throw");
  await api.saveListener({
    name,
    filter: { types: ["object.written"], aliases: ["in/**"] },
    batch: { window_seconds: 0 },
    action: { type: "workflow", workflow: "sdkThrower", task_queue: queue },
    retry: { attempts: 1, delay_seconds: 0 },
  });
  try {
    const { session } = await api.openSession();
    await api.writeObject(session.id, "in/1", { type: "in" });
    const byRetry = await failedAndRepeated(api, session.id, name);
    assert.deepEqual(byRetry.map((r) => r.status), ["failed", "completed"]);
    assert.match(byRetry[0].error, /boom: a bug in the run's own code/);
  } finally {
    await api.deleteListener(name);
  }
});

test("a run that cleans up after its cancellation and returns ends cancelled", { skip }, async () => {
  const api = client();
  const name = fresh("ts_clean");
  await api.saveListener({
    name,
    filter: { types: ["object.written"], aliases: ["ask/**"] },
    batch: { window_seconds: 0 },
    action: { type: "workflow", workflow: "sdkCleaner", task_queue: queue },
    cancel_on: [{ types: ["object.written"], aliases: ["stop/**"], grace_seconds: 30 }],
    owns: ["out/**"],
  });
  try {
    const { session } = await api.openSession();
    await api.writeObject(session.id, "ask/1", { type: "ask" });
    await eventually(async () => {
      const { executions } = await api.listExecutions(session.id, { listener: name });
      return executions.length === 1 && executions[0].waiting !== undefined;
    }, "the waiting run", 30_000);
    await api.writeObject(session.id, "stop/1", { type: "stop" });
    const run = await eventually(async () => {
      const { executions } = await api.listExecutions(session.id, { listener: name });
      return executions[0].status !== "running" && executions[0];
    }, "the run's end", 30_000);
    assert.equal(run.status, "cancelled", JSON.stringify(run));
    assert.deepEqual((await api.readObject(session.id, "out/cleaned")).object.value, { type: "cleaned" });
  } finally {
    await api.deleteListener(name);
  }
});
