// The client through the platform's HTTP door: typed methods called as the Python client's are, replies, and a
// refusal as the typed error of its code.
import assert from "node:assert/strict";
import { test } from "node:test";
import {
  Client,
  CommandError,
  InvalidRequestError,
  NotFoundError,
  RevConflictError,
  RateLimitedError,
  TransportError,
  UnauthorizedError,
  UnavailableError,
  commandError,
} from "../src";
import { client, fresh } from "./helpers";

test("every command the platform serves has its method", async () => {
  const api = client();
  const response = await fetch(`${api.url}/v1/schema`, { headers: { Authorization: `Bearer ${process.env.ORCHESTRATOR_API_TOKEN}` } });
  const schemas = (await response.json()) as { commands: Record<string, unknown> };
  const camel = (name: string) => name.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());
  const missing = Object.keys(schemas.commands).filter((name) => typeof (api as any)[camel(name)] !== "function");
  assert.deepEqual(missing, [], "the platform has commands this client has no method for: run `make docs`");
});

test("objects: written, read, listed, refused on a stale if_rev with the platform's code", async () => {
  const api = client();
  const { session } = await api.openSession({ alias: fresh("ts/objects") });
  assert.match(session.id, /^ses_/);
  const written = await api.writeObject(session.id, "tickets/1/meta", { type: "ticket", title: "printer" });
  assert.equal(written.object.rev, 1);
  assert.equal(typeof written.event_id, "number");
  const again = await api.writeObject(session.id, "tickets/1/meta", { type: "ticket", title: "fixed" }, { if_rev: 1 });
  assert.equal(again.object.rev, 2);
  const read = await api.readObject(session.id, "tickets/1/meta");
  assert.deepEqual(read.object.value, { type: "ticket", title: "fixed" });
  const listed = await api.listObjects(session.id, { prefix: "tickets/" });
  assert.deepEqual(listed.objects.map((o) => o.alias), ["tickets/1/meta"]);
  await assert.rejects(
    api.writeObject(session.id, "tickets/1/meta", { type: "ticket" }, { if_rev: 1 }),
    (err: unknown) => err instanceof RevConflictError && err.code === "rev_conflict" && err.status === 409,
  );
  const reply = await api.command({ command: "read_object", session_id: session.id, alias: "tickets/2/meta" });
  assert.equal(reply.status, "error", "command() answers an error reply as it is");
  await assert.rejects(api.readObject(session.id, "tickets/2/meta"), NotFoundError);
});

test("threads, the application's events, the stream's history and an event explained", async () => {
  const api = client();
  const { session } = await api.openSession();
  const posted = await api.postThreadItem(session.id, "chats/1", { type: "text", role: "user", message: "hello" });
  const items = await api.listThreadItems(session.id, "chats/1");
  assert.deepEqual(items.items.map((i: { id: string }) => i.id), [posted.item.id]);
  const type = fresh("ts.ping").replace("_", ".t");
  await api.saveEventType(type, { type: "object", properties: { n: { type: "integer" } }, required: ["n"] });
  const emitted = await api.emitEvent(session.id, type, { n: 1 });
  await assert.rejects(
    api.emitEvent(session.id, type, { n: "one" }),
    (err: unknown) => err instanceof InvalidRequestError && err.message.startsWith("data"),
  );
  const events = await api.listSessionEvents(session.id, { types: [type] });
  assert.deepEqual(events.events.map((e) => e.id), [emitted.event_id]);
  const explained = await api.explainEvent(session.id, emitted.event_id);
  assert.equal(explained.status, "success");
  await api.deleteEventType(type);
});

test("a listener's body is typed and validated, a task_queue included", async () => {
  const api = client();
  const name = fresh("ts_writer");
  const saved = await api.saveListener({
    name,
    filter: { types: ["object.written"], aliases: ["inbox/**"] },
    action: { type: "object", alias: "views/last", value: { type: "copy", from: "{{ event.alias }}" } },
  });
  assert.equal(saved.listener.name, name);
  await assert.rejects(
    api.saveListener({ name: fresh("ts_bad"), filter: { types: ["x.y"] }, action: { type: "workflow", workflow: "w", task_queue: "/_sys/q" } }),
    (err: unknown) => err instanceof InvalidRequestError && /task_queue/.test(err.message),
  );
  await api.deleteListener(name);
  await assert.rejects(api.getListener(name), NotFoundError);
});

test("the session's id comes first: the old order is refused before anything is sent", async () => {
  const api = client();
  const { session } = await api.openSession();
  await assert.rejects(api.getSchedule("clock", session.id), TypeError);
});

test("a wrong key is unauthorized, and an unreachable API a transport error", async () => {
  const api = client();
  const stranger = new Client(api.url, { token: "ork_not_a_key" });
  await assert.rejects(stranger.listListeners(), (err: unknown) => err instanceof UnauthorizedError && err.status === 401);
  await assert.rejects(stranger.listListeners(), CommandError);
  const nowhere = new Client("http://127.0.0.1:9", { timeoutMs: 2000 });
  await assert.rejects(nowhere.listListeners(), TransportError);
});

test("a reply that says when to try again is the error of its code, with the seconds", () => {
  const away = commandError({ status: "error", error: "unavailable", message: "database: out of reach", retry_after: 1 }, 503);
  assert.ok(away instanceof UnavailableError && away.retryAfterSeconds === 1 && away.status === 503, String(away));
  const limited = commandError({ status: "error", error: "rate_limited", message: "key: over", retry_after: 3 }, 429);
  assert.ok(limited instanceof RateLimitedError && !(limited instanceof UnavailableError), String(limited));
  assert.equal((limited as RateLimitedError).retryAfterSeconds, 3);
});

test("an argument left out is not sent, and an explicit null is", async () => {
  const sent: unknown[] = [];
  const fake = (async (_url: string, init: { body: string }) => {
    sent.push(JSON.parse(init.body));
    return new Response(JSON.stringify({ status: "success", schedule: {} }), { status: 200 });
  }) as unknown as typeof fetch;
  const api = new Client("http://127.0.0.1:1", { fetch: fake });
  await api.updateSchedule("ses_1", "clock", { end_date: null });
  await api.updateSchedule("ses_1", "clock", { end_date: undefined, start_date: "2027-01-01" });
  assert.deepEqual(sent, [
    { command: "update_schedule", session_id: "ses_1", alias: "clock", end_date: null },
    { command: "update_schedule", session_id: "ses_1", alias: "clock", start_date: "2027-01-01" },
  ]);
});

test("fromEnv finds the API where the CLI would, unless ORCHESTRATOR_URL says", () => {
  assert.equal(Client.fromEnv({}).url, "http://127.0.0.1:8700");
  assert.equal(Client.fromEnv({ ORCHESTRATOR_HTTP_HOST: "0.0.0.0", ORCHESTRATOR_HTTP_PORT: "9100" }).url, "http://127.0.0.1:9100");
  assert.equal(Client.fromEnv({ ORCHESTRATOR_HTTP_HOST: "::1", ORCHESTRATOR_HTTP_PORT: "9100" }).url, "http://[::1]:9100");
  const both = { ORCHESTRATOR_URL: "http://api.internal:8700/", ORCHESTRATOR_HTTP_PORT: "9100" };
  assert.equal(Client.fromEnv(both).url, "http://api.internal:8700");
});
