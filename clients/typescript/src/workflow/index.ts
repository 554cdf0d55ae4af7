/**
 * The run-side SDK for a workflow in TypeScript (`@temporalio/workflow`) started by a listener on a task queue its
 * action names: what `orchestrator.sdk.RunSession` is to a Python run.
 *
 * Owns turning each read or write into the platform's activity `orchestrator.session`, called by name on the
 * platform's task queue (`RunInput.platform_task_queue`), with the same `SessionCall` a Python run sends: the run's
 * listener and execution (so its writes never wake its own listener, and `owns` holds), its batch's depth, and an
 * idempotency key for each write made as `sdk.py` makes it (`keys.ts`), so an activity retried after its write
 * committed, or a batch run again, finds that write instead of making another. A refusal (`rev_conflict`,
 * `access_denied`, ...) is a `SessionError` with the platform's code; uncaught, it fails the run with that code as
 * its error's type. The run's end is reported by `./interceptors`, which the worker is given.
 *
 * @example
 * import { RunInput, RunSession } from "@orchestrator/client/workflow";
 *
 * export async function summarize(run: RunInput): Promise<void> {
 *   const session = new RunSession(run);
 *   for (const message of await session.batchMessages()) {
 *     if (message.alias !== null) {
 *       const meta = await session.readObject(message.alias);
 *     }
 *   }
 *   await session.writeObject("views/status", { type: "status", ok: true });
 * }
 */

import {
  ActivityFailure,
  ApplicationFailure,
  CancellationScope,
  condition,
  defineSignal,
  isCancellation,
  proxyActivities,
  setHandler,
  workflowInfo,
} from "@temporalio/workflow";
import { callKey } from "./keys";

export { callKey, pythonJson, sha256Hex } from "./keys";

/** The activity a run reads and writes its session with, served on the platform's task queue. */
export const SESSION_ACTIVITY = "orchestrator.session";
/** The signal that tells a run one of its waits was answered. */
export const WAIT_SIGNAL = "orchestrator.wait_answered";
/** How many events of a heavy wait's answer one call reads. */
const ANSWER_PAGE = 100;

/** A pointer to one entry of the batch: where the run should look. */
export interface BatchMessage {
  id: number;
  type: string;
  alias: string | null;
  item_id?: string;
  execution_id?: string;
  nodes?: string[];
  [key: string]: unknown;
}

/** `batch` as the run sees it (`BatchInfo` in `workflows/messages.py`). */
export interface BatchInfo {
  first_id: number;
  last_id: number;
  count: number;
  retry: number;
  lane: string;
  /** Every event the batch consumed, ascending (those `distinct_by` superseded too). */
  event_ids: number[];
  /** The pointers, when the listener's template names `batch.messages`; else null (read them with `batchMessages`). */
  messages?: BatchMessage[] | null;
  /** The envelopes, when the template names them; else null (read them with `batchEvents`). */
  events?: Array<Record<string, any>> | null;
  /** The entries' ids when fewer than `event_ids` and the pointers did not come. */
  entry_ids?: number[] | null;
  /** A replayed batch: the first event id of the batch it replays. */
  replay_of?: number | null;
}

/** The one argument of a workflow a listener starts (`RunInput` in `workflows/messages.py`). */
export interface RunInput<Input = unknown> {
  session_id: string;
  listener: string;
  batch: BatchInfo;
  /** The action's `input`, rendered for this batch. */
  input: Input;
  execution_id?: string | null;
  /** The batch's run, the same across its retries. */
  run_key?: string | null;
  depth: number;
  /** A schedule's firing: `{alias, due_at}`, and `set_by` (the run's execution) for a timer a run set. */
  scheduled?: Record<string, unknown> | null;
  /** The platform's task queue, where `orchestrator.session` and `orchestrator.run_ended` are served. */
  platform_task_queue?: string | null;
}

/** What a run sends the platform for one read or write (`SessionCall` in `activities/session.py`). */
export interface SessionCall {
  op: string;
  args: Record<string, unknown>;
  session_id: string;
  listener: string | null;
  execution_id: string | null;
  depth: number;
  idempotency_key: string | null;
  batch: { lane: string; first_id: number; last_id: number } | null;
}

/** A wait's answer: the first condition that held and the events it took, or `matched: null` on a timeout. */
export interface WaitAnswer {
  matched: number | null;
  events: Array<Record<string, any>>;
}

/**
 * A refusal from the session, with the platform's code (`rev_conflict`, `not_found`, `access_denied`, ...). It is
 * an `ApplicationFailure` whose type is the code: a run that does not catch it fails with it.
 */
export class SessionError extends ApplicationFailure {
  readonly code: string;

  constructor(code: string, message: string) {
    super(message, code, true);
    this.code = code;
  }
}

interface Wait {
  seq: number;
  run_id?: string;
  state?: string;
  matched?: number | null;
  event_ids?: number[];
  events?: Array<Record<string, any>> | null;
}

/** The answers the platform signalled to this run's waits, by wait number, and how many waits it began. */
class Answers {
  readonly bySeq = new Map<number, Wait>();
  waits = 0;

  take(answer: Wait): void {
    // The first telling of a wait's answer; one for an earlier run of this workflow (before a continue-as-new)
    // is not this run's.
    if ((answer.run_id ?? "") === "" || answer.run_id === workflowInfo().runId) {
      if (!this.bySeq.has(Number(answer.seq))) this.bySeq.set(Number(answer.seq), answer);
    }
  }
}

// One per workflow run: a workflow's module state is its own in Temporal's sandbox.
let answers: Answers | undefined;

function theAnswers(): Answers {
  if (answers === undefined) {
    const made = new Answers();
    setHandler(defineSignal<[Wait]>(WAIT_SIGNAL), (answer) => made.take(answer));
    answers = made;
  }
  return answers;
}

type CallOptions = { write?: boolean; counted?: boolean };

/** A run's door to its session. Use it only inside the workflow the listener started. */
export class RunSession {
  readonly run: RunInput;
  private calls = 0;
  private readonly activity: (call: SessionCall) => Promise<any>;

  constructor(run: RunInput) {
    this.run = run;
    const activities = proxyActivities<Record<string, (call: SessionCall) => Promise<any>>>({
      // The platform's queue; without one the run is on it (a Python run), and its own queue is it.
      taskQueue: run.platform_task_queue ?? undefined,
      startToCloseTimeout: "30 seconds",
      retry: { initialInterval: "200 milliseconds", maximumInterval: "10 seconds" },
    });
    this.activity = activities[SESSION_ACTIVITY];
  }

  /**
   * One call: `args` as `sdk.py` passes them, unset ones as null (they count in a write's digest, and are left out
   * of what is sent). A read that only some runs of the same code make takes no place among the calls.
   */
  private async call(op: string, args: Record<string, unknown>, options: CallOptions = {}): Promise<any> {
    const run = this.run;
    if (options.counted ?? true) this.calls += 1;
    const key = options.write ? callKey(run.run_key || run.execution_id || "", this.calls, op, args) : null;
    const sent: Record<string, unknown> = {};
    for (const [name, value] of Object.entries(args)) {
      if (value !== null && value !== undefined) sent[name] = value;
    }
    const call: SessionCall = {
      op,
      args: sent,
      session_id: run.session_id,
      listener: run.listener || null,
      execution_id: run.execution_id ?? null,
      depth: run.depth,
      idempotency_key: key,
      batch: run.listener ? { lane: run.batch.lane, first_id: run.batch.first_id, last_id: run.batch.last_id } : null,
    };
    try {
      return await this.activity(call);
    } catch (err) {
      if (err instanceof ActivityFailure && err.cause instanceof ApplicationFailure && err.cause.type) {
        throw new SessionError(err.cause.type, err.cause.message);
      }
      throw err;
    }
  }

  /** The object at `alias` (`value`, `rev`, ...), or null if there is none. */
  async readObject(alias: string): Promise<Record<string, any> | null> {
    // Python's None crosses as Temporal's null payload, which TypeScript decodes as undefined.
    return (await this.call("read_object", { alias })) ?? null;
  }

  /** Write the object; answers `{alias, rev, event_id}`. `ifRev` refuses with `rev_conflict` when it differs. */
  writeObject<V extends { type: string }>(alias: string, value: V, ifRev?: number): Promise<Record<string, any>> {
    return this.call("write_object", { alias, value, if_rev: ifRev ?? null }, { write: true });
  }

  deleteObject(alias: string): Promise<Record<string, any>> {
    return this.call("delete_object", { alias }, { write: true });
  }

  listObjects(prefix?: string): Promise<Array<Record<string, any>>> {
    return this.call("list_objects", { prefix: prefix ?? null });
  }

  /** Post an item (`type`, `role`, `message`, `metadata`); answers `{id, alias, event_id}`. */
  postThreadItem<I extends { type: string }>(alias: string, item: I): Promise<Record<string, any>> {
    return this.call("post_thread_item", { alias, item }, { write: true });
  }

  listThreadItems(alias: string, after?: string, limit?: number): Promise<Array<Record<string, any>>> {
    return this.call("list_thread_items", { alias, after: after ?? null, limit: limit ?? null });
  }

  /** Patch the session's graph all or none; `ifRev` refuses with `rev_conflict`. Answers `{rev, changed, event_id}`. */
  updateGraph(patch: Record<string, unknown>, ifRev?: number): Promise<Record<string, any>> {
    return this.call("update_graph", { patch, if_rev: ifRev ?? null }, { write: true });
  }

  /** The session's graph (`rev`, `nodes`, `edges`), or only `nodes` and their edges. */
  readGraph(nodes?: string[]): Promise<Record<string, any>> {
    return this.call("read_graph", { nodes: nodes ?? null });
  }

  /**
   * Set a timer of the run's own: `repeat` as `create_schedule` takes it, firing `target` (an object write, or a
   * workflow to start); `timing` adds `start_date`, `end_date`. The same alias again replaces it. `targetType`
   * (`object`, `workflow`) is what the target says when left out.
   */
  schedule(
    alias: string,
    repeat: Record<string, unknown>,
    target: Record<string, unknown>,
    targetType: "object" | "workflow" | null = null,
    timing: Record<string, unknown> = {},
  ): Promise<Record<string, any>> {
    return this.call(
      "schedule",
      { alias, repeat, target, invocation_target_type: targetType, ...timing },
      { write: true },
    );
  }

  /** Delete the timer at `alias` (null when there was none). */
  async unschedule(alias: string): Promise<Record<string, any> | null> {
    return (await this.call("unschedule", { alias }, { write: true })) ?? null;
  }

  /** Emit one of the application's declared events; answers its id (the same when the call is retried). */
  async emit(type: string, data: Record<string, unknown>): Promise<number> {
    const ids: number[] = await this.call("emit_events", { events: [{ type, data }] }, { write: true });
    return ids[0];
  }

  /** Emit several (`{type, data}` each), all or none; answers their ids. */
  emitMany(events: Array<{ type: string; data: Record<string, unknown> }>): Promise<number[]> {
    return this.call("emit_events", { events }, { write: true });
  }

  /** Close the run's session; with `drain` (the default), once what is pending now has fired and its runs ended. */
  closeSession(drain = true): Promise<Record<string, any>> {
    return this.call("close_session", { drain });
  }

  /**
   * The batch's pointers, one per entry, by id: `batch.messages` when the template names them and they came with
   * the run, else read once from the store.
   */
  async batchMessages(): Promise<BatchMessage[]> {
    const batch = this.run.batch;
    if (batch.messages !== null && batch.messages !== undefined) return batch.messages;
    const ids = batch.entry_ids ?? batch.event_ids;
    if (ids.length === 0) return [];
    return this.call("batch_messages", { ids }, { counted: false });
  }

  /** The batch's events whole, `limit` at a time (at most 1,000) from `offset` among `batch.event_ids`. */
  async batchEvents(offset = 0, limit = 200): Promise<Array<Record<string, any>>> {
    const ids = this.run.batch.event_ids.slice(offset, offset + Math.min(limit, 1000));
    if (ids.length === 0) return [];
    return this.call("batch_events", { ids });
  }

  /** The session's stream; pass `batch.first_id - 1` / `batch.last_id + 1` to read around the batch. */
  listEvents(
    options: { after?: number; before?: number; limit?: number; types?: string[] } = {},
  ): Promise<Array<Record<string, any>>> {
    const { after, before, limit, types } = options;
    return this.call("list_session_events", {
      after: after ?? null,
      before: before ?? null,
      limit: limit ?? null,
      types: types ?? null,
    });
  }

  /**
   * The session's stream as the command pages it: `events`, and `last_id`, where to continue (the last
   * id answered, or `after` when none). `{after: batch.first_id - 1, before: batch.last_id + 1}` reads around the
   * batch.
   */
  async listSessionEvents(
    options: { after?: number; before?: number; limit?: number; types?: string[] } = {},
  ): Promise<{ events: Array<Record<string, any>>; last_id: number }> {
    const events = await this.listEvents(options);
    return { events, last_id: events.length > 0 ? events[events.length - 1].id : (options.after ?? 0) };
  }

  /**
   * Wait for the next events this run needs (`docs/waits.md`): each condition is a listener's filter; the wait
   * counts from `after` (by default the last event of the run's batch). Answers the first condition that held and
   * its events, or `{matched: null, events: []}` once `timeoutSeconds` pass. The run is told by a signal.
   */
  async waitForEvent(
    conditions: Array<Record<string, unknown>>,
    options: { timeoutSeconds: number; after?: number; maxEvents?: number },
  ): Promise<WaitAnswer> {
    const known = theAnswers();
    known.waits += 1;
    const seq = known.waits;
    const runId = workflowInfo().runId;
    const opened: Wait = await this.call("wait_open", {
      seq,
      run_id: runId,
      conditions,
      timeout_seconds: options.timeoutSeconds,
      after: options.after ?? null,
      max_events: options.maxEvents ?? 1,
    });
    if (opened.state === "answered" || opened.state === "abandoned") return this.heard(opened);
    let came: boolean;
    try {
      came = await condition(() => known.bySeq.has(seq), options.timeoutSeconds * 1000);
    } catch (err) {
      if (isCancellation(err)) {
        // The wait's caller gave up on it: closed, so what comes later is not taken for nobody, and an answer
        // that came meanwhile is left for the run's next wait.
        await CancellationScope.nonCancellable(() =>
          this.call("wait_close", { seq, run_id: runId, given_up: true }, { counted: false }),
        );
      }
      throw err;
    }
    if (!came) {
      return this.heard(await this.call("wait_close", { seq, run_id: runId }, { counted: false }));
    }
    return this.heard(known.bySeq.get(seq) as Wait);
  }

  private async heard(answer: Wait): Promise<WaitAnswer> {
    if (answer.state === "timed_out" || answer.state === "abandoned" || answer.matched === null || answer.matched === undefined) {
      return { matched: null, events: [] };
    }
    let events = answer.events;
    if (events === null || events === undefined) {
      const ids = answer.event_ids ?? [];
      events = [];
      for (let start = 0; start < ids.length; start += ANSWER_PAGE) {
        events.push(...(await this.call("batch_events", { ids: ids.slice(start, start + ANSWER_PAGE) }, { counted: false })));
      }
    }
    return { matched: answer.matched, events };
  }
}
