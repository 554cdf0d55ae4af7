/**
 * A run reports its own end: give this module to the worker (`interceptors: { workflowModules:
 * [require.resolve("@orchestrator/client/workflow/interceptors")] }`), as the platform's Python worker has
 * `RunEndInterceptor` (`workflows/run_end.py`).
 *
 * Owns the last step of a run the platform started on a task queue its action names: once the workflow completes,
 * fails or is cancelled, it calls `orchestrator.run_ended` by name on the platform's task queue (the run's memo,
 * `RunTag`, names it), which records the end and its `execution.ended` event and frees the run's slot or sets its
 * repeat. A workflow without the platform's memo is left alone. Any error the run's code lets out ends it `failed`
 * (a `TypeError` as an `ApplicationFailure` does), so a listener's retry, `listener.failed` and an inbox hear of it;
 * only the SDK's own (`WorkflowError`: nondeterminism; a local activity's backoff) fail the workflow task, which
 * Temporal retries: not an end, nor is a continue-as-new. A run asked to cancel that cleans up and returns, or
 * whose clean-up fails, ends `cancelled`, as one that lets the cancellation through. A run that never reports (no
 * interceptor, a worker gone) is found ended by the platform's run sweep, later. As the Python worker's
 * `RunEndInterceptor` decides.
 */

import {
  ApplicationFailure,
  CancellationScope,
  ContinueAsNew,
  LocalActivityDoBackoff,
  Next,
  TemporalFailure,
  WorkflowExecuteInput,
  WorkflowError,
  WorkflowInboundCallsInterceptor,
  WorkflowInterceptorsFactory,
  isCancellation,
  proxyActivities,
  workflowInfo,
} from "@temporalio/workflow";

/** The memo key under which a run carries its `RunTag`. */
export const RUN_MEMO = "orchestrator";
export const RUN_ENDED_ACTIVITY = "orchestrator.run_ended";
// How much of a failed run's error its record keeps; the full failure stays in its history.
const ERROR_CHARS = 4_000;

/** Who a run is, as its memo says (`RunTag`): sent back whole with its end. */
export interface RunTag {
  execution_id: string;
  session_id: string;
  workflow: string;
  platform_task_queue?: string | null;
  [key: string]: unknown;
}

export interface RunEnd {
  tag: RunTag;
  status: "completed" | "failed" | "cancelled";
  error: string | null;
  error_type: string | null;
  /** The run's own time at its end (epoch seconds): on a server that skips time, what it has skipped. */
  at: number;
}

async function report(tag: RunTag, status: RunEnd["status"], error: string | null, errorType: string | null = null) {
  const queue = tag.platform_task_queue;
  if (!queue) return; // not a run on a queue of its own: nobody here to tell (the sweep finds its end)
  const { [RUN_ENDED_ACTIVITY]: runEnded } = proxyActivities<Record<string, (end: RunEnd) => Promise<void>>>({
    taskQueue: queue,
    startToCloseTimeout: "30 seconds",
    retry: { initialInterval: "200 milliseconds", maximumInterval: "10 seconds" },
  });
  const end: RunEnd = {
    tag,
    status,
    error: error === null ? null : error.slice(0, ERROR_CHARS),
    error_type: errorType,
    at: Date.now() / 1000, // in a workflow, Date.now() is the run's time (deterministic)
  };
  // A cancelled run still reports: outside its cancelled scope.
  await CancellationScope.nonCancellable(() => runEnded(end));
}

/** Whether Temporal asked this run to cancel (`cancel_on`, a graceful `stop_execution`), whatever its code did. */
function askedToCancel(): boolean {
  return CancellationScope.current().consideredCancelled;
}

class ReportsItsEnd implements WorkflowInboundCallsInterceptor {
  async execute(input: WorkflowExecuteInput, next: Next<WorkflowInboundCallsInterceptor, "execute">): Promise<unknown> {
    const tag = workflowInfo().memo?.[RUN_MEMO] as RunTag | undefined;
    if (tag === undefined || tag === null) return next(input);
    let result: unknown;
    try {
      result = await next(input);
    } catch (err) {
      // The SDK's own: the task fails and is retried, the run goes on (or continues as new).
      if (err instanceof ContinueAsNew || err instanceof WorkflowError || err instanceof LocalActivityDoBackoff) throw err;
      const message = err instanceof Error ? err.message : String(err);
      const kind = err instanceof ApplicationFailure && err.type ? err.type : err instanceof Error ? err.name : typeof err;
      if (isCancellation(err) || askedToCancel()) {
        await report(tag, "cancelled", message || "cancelled");
      } else {
        await report(tag, "failed", err instanceof TemporalFailure ? message : message || kind, kind);
      }
      // Any other error ends the run too: failing the workflow task instead would retry it for ever.
      if (err instanceof TemporalFailure) throw err;
      throw ApplicationFailure.create({ message: message || kind, type: kind, nonRetryable: true, cause: err as Error });
    }
    // It heard its cancellation, cleaned up and returned: it ended because it was asked to.
    const asked = askedToCancel();
    await report(tag, asked ? "cancelled" : "completed", asked ? "cancelled" : null);
    return result;
  }
}

/** The workflow interceptors of a worker whose runs the platform starts. */
export const interceptors: WorkflowInterceptorsFactory = () => ({ inbound: [new ReportsItsEnd()] });
