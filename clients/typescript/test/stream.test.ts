// The session's stream as an async iterator: batches as they commit, and a dropped connection resumed after the
// last batch (Last-Event-ID), so nothing is lost or told twice.
import assert from "node:assert/strict";
import { test } from "node:test";
import { Client, InvalidRequestError, StreamBatch } from "../src";
import { client } from "./helpers";

async function take(stream: AsyncGenerator<StreamBatch>, events: number): Promise<number[]> {
  const ids: number[] = [];
  for await (const batch of stream) {
    ids.push(...batch.events.map((e) => e.id as number));
    if (ids.length >= events) break;
  }
  return ids;
}

test("batches come as they commit, from after an event id, with the connection's filter", async () => {
  const api = client();
  const { session } = await api.openSession();
  const first = await api.writeObject(session.id, "notes/0", { type: "note" });
  const stream = api.stream(session.id, { after: first.event_id, filter: { types: ["object.written"], aliases: ["notes/**"] } });
  const taken = take(stream, 3);
  const ids = [];
  for (const n of [1, 2, 3]) {
    ids.push((await api.writeObject(session.id, `notes/${n}`, { type: "note" })).event_id);
    await api.writeObject(session.id, `other/${n}`, { type: "note" }); // outside the filter
  }
  assert.deepEqual(await taken, ids);
});

test("a dropped connection is resumed after the last batch, with Last-Event-ID", async () => {
  const api = client();
  const { session } = await api.openSession();
  const start = await api.writeObject(session.id, "notes/0", { type: "note" });
  const asked: Array<string | null> = [];
  let connections = 0;
  // A fetch whose first stream ends right after its first batch, as a proxy that drops a connection would.
  const dropping: typeof fetch = async (input, init) => {
    const response = await fetch(input, init);
    if (!String(input).includes("/stream")) return response;
    asked.push(new Headers(init?.headers).get("last-event-id"));
    connections += 1;
    if (connections > 1 || response.body === null) return response;
    const reader = response.body.getReader();
    const cut = new ReadableStream<Uint8Array>({
      async pull(controller) {
        const { done, value } = await reader.read();
        if (done) return controller.close();
        controller.enqueue(value);
        if (new TextDecoder().decode(value).includes("event: batch")) {
          await reader.cancel();
          controller.close();
        }
      },
    });
    return new Response(cut, { status: response.status, headers: response.headers });
  };
  const resuming = new Client(api.url, { token: process.env.ORCHESTRATOR_API_TOKEN, fetch: dropping });
  const stream = resuming.stream(session.id, { after: start.event_id });
  const taken = take(stream, 4);
  const ids: number[] = [];
  for (const n of [1, 2, 3, 4]) {
    ids.push((await api.writeObject(session.id, `notes/${n}`, { type: "note" })).event_id);
    await new Promise((done) => setTimeout(done, 150));
  }
  assert.deepEqual(await taken, ids, "every event once, across the dropped connection");
  assert.ok(connections >= 2, "it connected again");
  assert.equal(asked[0], String(start.event_id), "the first connection asked from `after`");
  assert.ok(Number(asked[1]) >= ids[0] && Number(asked[1]) < ids[3], "the second asked from the last batch it had");
});

test("a connection broken partway through a batch resumes before that batch, which comes whole", { timeout: 30_000 }, async () => {
  const api = client();
  const { session } = await api.openSession();
  const start = await api.writeObject(session.id, "notes/0", { type: "note" });
  const asked: Array<string | null> = [];
  let cut!: () => void;
  const wasCut = new Promise<void>((done) => (cut = done));
  // The first stream passes its opening message, then the first batch's `id:` line and part of its data, and
  // breaks: a big batch arrives in many chunks, and a proxy or the network may drop the connection between two.
  const breaking: typeof fetch = async (input, init) => {
    const response = await fetch(input, init);
    if (!String(input).includes("/stream")) return response;
    asked.push(new Headers(init?.headers).get("last-event-id"));
    if (asked.length > 1 || response.body === null) return response;
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let seen = "";
    const broken = new ReadableStream<Uint8Array>({
      async pull(controller) {
        const { done, value } = await reader.read();
        if (done) return controller.close();
        const before = seen.length;
        seen += decoder.decode(value, { stream: true });
        const batch = seen.indexOf("event: batch");
        const data = batch === -1 ? -1 : seen.indexOf("data: ", batch);
        if (data === -1 || seen.length < data + 12) {
          controller.enqueue(new TextEncoder().encode(seen.slice(before)));
          return;
        }
        controller.enqueue(new TextEncoder().encode(seen.slice(before, data + 12)));
        await reader.cancel();
        controller.close();
        cut();
      },
    });
    return new Response(broken, { status: response.status, headers: response.headers });
  };
  const resuming = new Client(api.url, { token: process.env.ORCHESTRATOR_API_TOKEN, fetch: breaking });
  let last = Infinity;
  const taken: number[] = [];
  const taking = (async () => {
    for await (const batch of resuming.stream(session.id, { after: start.event_id })) {
      taken.push(...batch.events.map((e) => e.id as number));
      if (taken[taken.length - 1] >= last) break;
    }
  })();
  const ids: number[] = [];
  for (const n of [1, 2]) ids.push((await api.writeObject(session.id, `notes/${n}`, { type: "note" })).event_id);
  await wasCut;
  last = (await api.writeObject(session.id, "notes/3", { type: "note" })).event_id;
  ids.push(last);
  await taking;
  assert.deepEqual(taken, ids, "every event once: the batch broken off came again, whole");
  assert.equal(asked[1], String(start.event_id), "the reconnect asked from the last whole message, not the broken one");
});

test("a stream opened at the session's end and dropped before its first batch resumes where it opened", { timeout: 30_000 }, async () => {
  const api = client();
  const { session } = await api.openSession();
  const opened = await api.writeObject(session.id, "notes/0", { type: "note" });
  const asked: Array<string | null> = [];
  let cut!: () => void;
  const wasCut = new Promise<void>((done) => (cut = done));
  let written!: () => void;
  const wereWritten = new Promise<void>((done) => (written = done));
  // The first stream ends right after the server's opening message; the next connects once the writes are in.
  const dropping: typeof fetch = async (input, init) => {
    if (!String(input).includes("/stream")) return fetch(input, init);
    asked.push(new Headers(init?.headers).get("last-event-id"));
    if (asked.length > 1) {
      await wereWritten;
      return fetch(input, init);
    }
    const response = await fetch(input, init);
    if (response.body === null) return response;
    const reader = response.body.getReader();
    const opening = new ReadableStream<Uint8Array>({
      async pull(controller) {
        const { done, value } = await reader.read();
        if (!done) controller.enqueue(value);
        await reader.cancel();
        controller.close();
        cut();
      },
    });
    return new Response(opening, { status: response.status, headers: response.headers });
  };
  const resuming = new Client(api.url, { token: process.env.ORCHESTRATOR_API_TOKEN, fetch: dropping });
  const taken = take(resuming.stream(session.id), 2);
  await wasCut;
  const ids: number[] = [];
  for (const n of [1, 2]) ids.push((await api.writeObject(session.id, `notes/${n}`, { type: "note" })).event_id);
  written();
  assert.deepEqual(await taken, ids, "what was committed while it was away came on the next connection");
  assert.equal(asked[1], String(opened.event_id), "it resumed from the position the stream opened at");
});

test("bad parameters are refused with the platform's code", async () => {
  const api = client();
  const { session } = await api.openSession();
  const stream = api.stream(session.id, { filter: { types: ["no**glob[" as string] } });
  await assert.rejects(stream.next(), InvalidRequestError);
});

test("a stream the server closes for good says why and ends", { timeout: 30_000 }, async () => {
  const api = client();
  const { session } = await api.openSession();
  const said: string[] = [];
  const stream = api.stream(session.id, { onClosed: (closed) => said.push(closed.reason) });
  const ended = (async () => {
    for await (const _ of stream) {
      // no batch is written
    }
  })();
  await new Promise((resolve) => setTimeout(resolve, 500));
  await api.deleteSession(session.id);
  await ended;
  assert.equal(said.length, 1);
  assert.match(said[0], /deleted/);
});
