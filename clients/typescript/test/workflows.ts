// Workflows of the run-side SDK's tests, bundled by the test's worker: they read and write their session through
// the platform's activities by name, from a TypeScript worker on a task queue of its own.
import { ApplicationFailure, CancellationScope, isCancellation } from "@temporalio/workflow";
import { RunInput, RunSession, SessionError } from "../src/workflow";

async function refusal(call: Promise<unknown>): Promise<string | null> {
  try {
    await call;
    return null;
  } catch (err) {
    if (err instanceof SessionError) return err.code;
    throw err;
  }
}

/** Reads its batch, writes, is refused twice, and fails its first attempt when asked (after its writes). */
export async function sdkWriter(run: RunInput<{ fail_first?: boolean }>): Promise<string> {
  const session = new RunSession(run);
  const messages = await session.batchMessages();
  const missing = await session.readObject("nothing/here");
  await session.writeObject("out/summary", { type: "summary", aliases: messages.map((m) => m.alias) });
  await session.postThreadItem("out/thread", { type: "text", role: "assistant", message: "seen" });
  const conflict = await refusal(session.writeObject("out/summary", { type: "summary" }, 99));
  const denied = await refusal(session.writeObject("elsewhere/x", { type: "x" }));
  const events = await session.batchEvents();
  const paged = await session.listSessionEvents({ after: run.batch.first_id - 1, before: run.batch.last_id + 1 });
  // Timers whose type is what their target says: an object's write, and a workflow's start (which `owns` refuses:
  // a run it started would be held by none).
  const hourly = { type: "interval", every_seconds: 3600 };
  const timer = await session.schedule("out/timer", hourly, { alias: "out/tick", value: { type: "tick" } });
  await session.unschedule("out/timer");
  const started = await refusal(session.schedule("out/starter", hourly, { workflow: "sdkWaiter" }));
  await session.writeObject("out/notes", {
    type: "notes",
    missing,
    conflict,
    denied,
    event_ids: events.map((e) => e.id),
    paged: { ids: paged.events.map((e) => e.id), last_id: paged.last_id },
    timer: [timer.target.alias, started],
    platform_task_queue: run.platform_task_queue,
  });
  if (run.input?.fail_first && run.batch.retry === 0) {
    throw ApplicationFailure.nonRetryable("asked to fail its first attempt", "AskedToFail");
  }
  return "done";
}

/** Waits for a reply (`reply/**`) after its batch, and writes what it heard: the events, or a timeout's null. */
export async function sdkWaiter(run: RunInput<{ timeout: number }>): Promise<void> {
  const session = new RunSession(run);
  const answer = await session.waitForEvent([{ types: ["object.written"], aliases: ["reply/**"] }], {
    timeoutSeconds: run.input.timeout,
  });
  await session.writeObject("out/heard", {
    type: "heard",
    matched: answer.matched,
    aliases: answer.events.map((event) => event.alias),
  });
}

/** Throws a plain error (a bug, not a Temporal failure) on its first attempt; completes on its repeat. */
export async function sdkThrower(run: RunInput<null>): Promise<string> {
  if (run.batch.retry === 0) throw new TypeError("boom: a bug in the run's own code");
  return "done";
}

/** Waits; when cancelled it cleans up (a write outside its cancelled scope) and returns instead of rethrowing. */
export async function sdkCleaner(run: RunInput<null>): Promise<string> {
  const session = new RunSession(run);
  try {
    await session.waitForEvent([{ types: ["object.written"], aliases: ["never/**"] }], { timeoutSeconds: 60 });
  } catch (err) {
    if (!isCancellation(err)) throw err;
    await CancellationScope.nonCancellable(() => session.writeObject("out/cleaned", { type: "cleaned" }));
  }
  return "returned";
}
