/** What the node tests share: a client of the platform under test, fresh names, and waiting for a condition. */

import { randomBytes } from "node:crypto";
import { Client } from "../src";

export function client(): Client {
  if (!process.env.ORCHESTRATOR_URL) throw new Error("ORCHESTRATOR_URL is not set: run the tests with `npm test`");
  return Client.fromEnv();
}

/** A name no other test (nor an earlier run against the same platform) uses. */
export function fresh(prefix: string): string {
  return `${prefix}_${randomBytes(5).toString("hex")}`;
}

export async function eventually<T>(check: () => Promise<T | undefined | null | false>, what: string, ms = 30_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const found = await check();
    if (found) return found;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((done) => setTimeout(done, 100));
  }
}

/** The Temporal server of the platform under test, when known (a platform `npm test` started). */
export const TEMPORAL = process.env.ORCHESTRATOR_TEMPORAL_ADDRESS;
export const NAMESPACE = process.env.ORCHESTRATOR_TEMPORAL_NAMESPACE || "default";
