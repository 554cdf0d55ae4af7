/**
 * The TypeScript door: `Client`, over the platform's HTTP API, with one typed method per command (generated from
 * the commands' JSON Schemas into `generated.ts`) and the session's stream as an async iterator.
 *
 * Owns turning method calls into command bodies and replies into results; what the commands mean is the
 * platform's (`docs/commands.md`). `command()` returns every reply as it is, errors included, like the other
 * doors; the typed methods return the success reply and throw the `CommandError` of its code on an error reply.
 * A method is called as the Python client's is: the session's id first, then what the command acts on and the
 * body it carries, and everything else in one options object named as the command's fields (`if_rev`, `limit`).
 * It needs nothing but the platform's own `fetch` (Node 18 or newer, a browser, Deno, Bun).
 */

import { CommandError, TransportError, commandError } from "./errors";
import {
  BatchSpec,
  CommandBody,
  CommandName,
  CommandReplies,
  GeneratedCommands,
  ListenerFilter,
  Reply,
} from "./generated";
import { SseParser } from "./sse";

export const DEFAULT_TIMEOUT_MS = 30_000;
// How every session's id starts; aliases are what an application names.
const SESSION_ID_PREFIX = "ses_";
// The platform sends a heartbeat every 15 s: a stream silent for three of them is taken for dead.
export const STREAM_IDLE_MS = 45_000;
// How long a dropped stream waits before it connects again, unless the server said (`retry:`).
export const RECONNECT_MS = 1_000;

export interface ClientOptions {
  /** A key (`ork_...`) or the bootstrap token, sent as `Authorization: Bearer`. */
  token?: string;
  /** How long a command may take, in milliseconds. */
  timeoutMs?: number;
  /** Another `fetch` (a test's, one with a proxy): the platform's own by default. */
  fetch?: typeof fetch;
}

/** A reply as the platform sends it, success or error. */
export type AnyReply = Reply | { status: "error"; error: string; message: string; retry_after?: number };

/** One batch of a connection listener: `{first_id, last_id, count, events}`. */
export interface StreamBatch {
  first_id: number;
  last_id: number;
  count: number;
  events: Array<Record<string, any>>;
}

export interface StreamOptions {
  /** Start after this event id (else after `Last-Event-ID` of a reconnect, else at the session's end). */
  after?: number;
  /** The connection listener's filter and batch, as a saved listener's (`docs/listeners.md`). */
  filter?: ListenerFilter;
  batch?: BatchSpec;
  /** This connection's client id, which a `where` on `source.client` may leave out. */
  client?: string;
  /** Connect again after a dropped connection or a stopping server, from the last batch (default true). */
  reconnect?: boolean;
  /** Give up after this many connections in a row that failed before any message (default: never). */
  maxReconnects?: number;
  /** A stream silent this long (no batch, no heartbeat) is taken for dead and connected again. */
  idleMs?: number;
  /** Ends the iteration when aborted. */
  signal?: AbortSignal;
  /** Told when retention deleted some of what was asked for: `{after, first_id}`; the stream goes on from there. */
  onTrimmed?: (trimmed: { after: number; first_id: number }) => void;
  /**
   * Told why, when the server closed the stream for good (its key revoked, its session deleted, a reader too slow
   * whose connection still had room for the message): `{reason}`.
   */
  onClosed?: (closed: { reason: string }) => void;
}

/**
 * A door to the platform's commands over HTTP.
 *
 * @example
 * const client = new Client("http://127.0.0.1:8700", { token: process.env.ORCHESTRATOR_API_TOKEN });
 * const { session } = await client.openSession({ alias: "demo" });
 * await client.writeObject(session.id, "tickets/1/meta", { type: "ticket" });
 * for await (const batch of client.stream(session.id, { after: 0 })) console.log(batch.events);
 */
export class Client extends GeneratedCommands {
  readonly url: string;
  private readonly token?: string;
  private readonly timeoutMs: number;
  private readonly fetch: typeof fetch;

  /** A client of the HTTP API at `url`, its root (`http://127.0.0.1:8700`). */
  constructor(url: string, options: ClientOptions = {}) {
    super();
    this.url = url.replace(/\/+$/, "");
    this.token = options.token;
    this.timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    const given = options.fetch ?? globalThis.fetch;
    if (typeof given !== "function") {
      throw new TypeError("no fetch: run on Node 18 or newer, or pass ClientOptions.fetch");
    }
    this.fetch = given.bind(globalThis);
  }

  /**
   * A client as `ORCHESTRATOR_API_TOKEN`, on Node, of `ORCHESTRATOR_URL`, else of the API the CLI would call
   * (`ORCHESTRATOR_HTTP_HOST`, default `127.0.0.1`, and `ORCHESTRATOR_HTTP_PORT`, default 8700).
   */
  static fromEnv(env: Record<string, string | undefined> = process.env): Client {
    return new Client(env.ORCHESTRATOR_URL || apiUrl(env), { token: env.ORCHESTRATOR_API_TOKEN || undefined });
  }

  private headers(extra: Record<string, string> = {}): Record<string, string> {
    return { ...(this.token ? { Authorization: `Bearer ${this.token}` } : {}), ...extra };
  }

  /** Send one JSON command and return its reply, `{"status": "error", ...}` replies included. */
  async command(body: CommandBody | { command: string; [key: string]: unknown }): Promise<AnyReply> {
    return (await this.post(body)).reply;
  }

  /** A command's reply and the HTTP status it came with. */
  private async post(body: object): Promise<{ reply: AnyReply; status: number }> {
    const url = `${this.url}/v1/commands`;
    let response: Response;
    try {
      response = await this.fetch(url, {
        method: "POST",
        headers: this.headers({ "Content-Type": "application/json" }),
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(this.timeoutMs),
      });
    } catch (err) {
      throw new TransportError(`cannot reach the API at ${url}: ${String(err)}`, { cause: err });
    }
    const text = await response.text();
    let reply: unknown;
    try {
      reply = JSON.parse(text);
    } catch (err) {
      throw new TransportError(`${url} answered HTTP ${response.status} with no JSON reply: ${text.slice(0, 200)}`, {
        cause: err,
      });
    }
    if (typeof reply !== "object" || reply === null || !("status" in reply)) {
      throw new TransportError(`${url} answered HTTP ${response.status} with no reply: ${text.slice(0, 200)}`);
    }
    const answer = reply as AnyReply & { error?: string };
    if (answer.status !== "success" && answer.retry_after === undefined) {
      const after = response.headers.get("retry-after");
      if (after !== null && /^\d+$/.test(after)) (answer as { retry_after?: number }).retry_after = Number(after);
    }
    return { reply: answer, status: response.status };
  }

  protected async call<K extends CommandName>(name: K, args: object): Promise<CommandReplies[K]> {
    const given = args as { session_id?: unknown; alias?: unknown };
    if (typeof given.session_id === "string" && typeof given.alias === "string") {
      refuseTheOldOrder(name, given.session_id, given.alias);
    }
    const body: { command: string; [key: string]: unknown } = { command: name };
    // An argument left out is not sent; an explicit null is (`updateSchedule`'s `end_date: null` clears the date).
    for (const [key, value] of Object.entries(args)) {
      if (value !== undefined) body[key] = value;
    }
    const { reply, status } = await this.post(body);
    if (reply.status !== "success") {
      throw commandError(reply as Parameters<typeof commandError>[0], status);
    }
    // The platform's suite checks every reply against its command's model, which these types are generated from.
    return reply as unknown as CommandReplies[K];
  }

  /**
   * A connection listener on the session (`GET /v1/sessions/{id}/stream`): each batch as it comes. A dropped
   * connection (one broken partway through a batch included), a silent one or a stopping server is connected
   * again after the last whole batch (`Last-Event-ID`), so nothing is lost; a stream the server closes
   * (`event: closed`: a revoked key, a deleted session, a reader too slow when the message reaches it) ends the
   * iteration, as does `signal` or leaving the loop. A stream opened without `after` starts at the session's end
   * as the server found it, and one dropped before its first batch resumes from there (the server's opening `id`).
   *
   * @throws CommandError the stream was refused (bad parameters, an unknown session, a key without `listen:`).
   * @throws TransportError the API could not be reached, with `reconnect: false` or after `maxReconnects`.
   */
  async *stream(sessionId: string, options: StreamOptions = {}): AsyncGenerator<StreamBatch, void, undefined> {
    const query = new URLSearchParams();
    if (options.filter !== undefined) query.set("filter", JSON.stringify(options.filter));
    if (options.batch !== undefined) query.set("batch", JSON.stringify(options.batch));
    if (options.client !== undefined) query.set("client", options.client);
    const url = `${this.url}/v1/sessions/${encodeURIComponent(sessionId)}/stream?${query}`;
    const reconnect = options.reconnect ?? true;
    const idleMs = options.idleMs ?? STREAM_IDLE_MS;
    let position = options.after !== undefined ? String(options.after) : "";
    let failures = 0;
    while (!options.signal?.aborted) {
      let delay = RECONNECT_MS;
      const connection = new AbortController();
      const stop = () => connection.abort();
      options.signal?.addEventListener("abort", stop, { once: true });
      try {
        let response: Response;
        try {
          const headers = this.headers({ Accept: "text/event-stream", ...(position ? { "Last-Event-ID": position } : {}) });
          response = await this.fetch(url, { headers, signal: connection.signal });
        } catch (err) {
          if (options.signal?.aborted) return;
          failures += 1;
          if (!reconnect || (options.maxReconnects !== undefined && failures > options.maxReconnects)) {
            throw new TransportError(`cannot reach the stream at ${url}: ${String(err)}`, { cause: err });
          }
          await sleep(delay, options.signal);
          continue;
        }
        if (response.status !== 200) {
          const text = await response.text();
          let reply: Record<string, unknown> = {};
          try {
            reply = JSON.parse(text) as Record<string, unknown>;
          } catch {
            // not a reply: the status says it
          }
          throw commandError(reply, response.status);
        }
        if (response.body === null) throw new TransportError(`${url} answered with no body`);
        const parser = new SseParser(position);
        const decoder = new TextDecoder();
        const reader = response.body.getReader();
        let ended: "closed" | "dropped" = "dropped";
        try {
          reading: while (true) {
            const chunk = await readWithin(reader, idleMs);
            if (chunk === undefined) break; // ended, or silent too long: connect again
            failures = 0;
            const messages = parser.feed(decoder.decode(chunk, { stream: true }));
            // The parser's id moves only when a message ends, so a connection broken partway through a batch
            // resumes after the last whole one; the id the stream opened at (an id without data, which is no
            // message) is where a reconnect resumes before the first batch.
            if (parser.lastEventId) position = parser.lastEventId;
            for (const message of messages) {
              if (message.retry !== undefined) delay = message.retry;
              if (message.event === "batch") {
                const batch = JSON.parse(message.data) as StreamBatch;
                position = message.lastEventId || String(batch.last_id);
                yield batch;
              } else if (message.event === "trimmed") {
                options.onTrimmed?.(JSON.parse(message.data) as { after: number; first_id: number });
              } else if (message.event === "closed") {
                options.onClosed?.(JSON.parse(message.data) as { reason: string });
                ended = "closed";
                break reading;
              } else if (message.event === "shutdown") {
                break reading; // the server is stopping: this one, or another replica, is asked again
              }
            }
          }
        } finally {
          reader.cancel().catch(() => undefined);
        }
        if (ended === "closed" || !reconnect) return;
        await sleep(delay, options.signal);
      } finally {
        options.signal?.removeEventListener("abort", stop);
        connection.abort();
      }
    }
  }
}

/** The next chunk, or undefined when the stream ended or nothing came within `ms`. */
async function readWithin(reader: ReadableStreamDefaultReader<Uint8Array>, ms: number): Promise<Uint8Array | undefined> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const silent = new Promise<undefined>((resolve) => {
    timer = setTimeout(() => resolve(undefined), ms);
  });
  try {
    const read = reader.read().then(
      (result) => (result.done ? undefined : result.value),
      () => undefined,
    );
    return await Promise.race([read, silent]);
  } finally {
    clearTimeout(timer);
  }
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    }
    signal?.addEventListener("abort", done, { once: true });
  });
}

/**
 * Refuse a call that gives the alias where the session's id goes, the order the Python client's schedule methods
 * took before 2026-12-05 (`(alias, session_id)`): the platform would answer a `not_found` about a session named
 * by the alias. Only a session's id starts `ses_`.
 */
function refuseTheOldOrder(name: string, sessionId: string, alias: string): void {
  if (alias.startsWith(SESSION_ID_PREFIX) && !sessionId.startsWith(SESSION_ID_PREFIX)) {
    throw new TypeError(
      `${name}: the session's id comes first, (sessionId, alias, ...); this call gave ${JSON.stringify(sessionId)}` +
        ` as the session and the session's id ${JSON.stringify(alias)} as the alias`,
    );
  }
}

export { CommandError };

/** The API's root as the CLI finds it: a wildcard host is reached on loopback, an IPv6 one in brackets. */
function apiUrl(env: Record<string, string | undefined>): string {
  const given = env.ORCHESTRATOR_HTTP_HOST || "127.0.0.1";
  const host = given === "0.0.0.0" ? "127.0.0.1" : given;
  const port = (env.ORCHESTRATOR_HTTP_PORT || "8700").trim();
  return host.includes(":") ? `http://[${host}]:${port}` : `http://${host}:${port}`;
}
