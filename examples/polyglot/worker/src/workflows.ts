// The workflow of examples/polyglot: started by the platform on the task queue its listener's action names, with
// one argument, the run's input. It reads its batch's events and writes what it made of them, through the
// platform's activities by name (`RunSession`), as a Python run does.
import { RunInput, RunSession } from "@orchestrator/client/workflow";

export interface Summary {
  type: "order_summary";
  orders: string[];
  total: number;
  currency: string;
  batch: { first_id: number; last_id: number; retry: number };
}

export async function summarizeOrders(run: RunInput<{ currency: string }>): Promise<Summary> {
  const session = new RunSession(run);
  const events = await session.batchEvents();
  const previous = await session.readObject("summaries/orders");
  const seen: string[] = previous?.value?.orders ?? [];
  const total: number = previous?.value?.total ?? 0;
  const summary: Summary = {
    type: "order_summary",
    orders: [...seen, ...events.map((event) => String(event.data.order))],
    total: events.reduce((sum, event) => sum + Number(event.data.amount), total),
    currency: run.input.currency,
    batch: { first_id: run.batch.first_id, last_id: run.batch.last_id, retry: run.batch.retry },
  };
  await session.writeObject("summaries/orders", summary);
  return summary;
}
