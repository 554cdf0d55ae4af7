// Server-Sent Events as the platform sends them, read the way the HTML standard reads them.
import assert from "node:assert/strict";
import { test } from "node:test";
import { SseParser } from "../src/sse";

test("a batch, a heartbeat and a shutdown, in chunks cut anywhere", () => {
  const text =
    ": stream open\n\nid: 7\nevent: batch\ndata: {\"first_id\": 6, \"last_id\": 7}\n\n: heartbeat\n\n" +
    'event: shutdown\nretry: 1000\ndata: {"reason": "stopping"}\n\n';
  for (const size of [1, 2, 5, 13, text.length]) {
    const parser = new SseParser();
    const got = [];
    for (let i = 0; i < text.length; i += size) got.push(...parser.feed(text.slice(i, i + size)));
    assert.deepEqual(
      got.map((m) => [m.event, m.data, m.lastEventId, m.retry]),
      [
        ["batch", '{"first_id": 6, "last_id": 7}', "7", undefined],
        ["shutdown", '{"reason": "stopping"}', "7", 1000],
      ],
      `chunks of ${size}`,
    );
  }
});

test("CRLF and CR end lines too, a CRLF split across chunks included", () => {
  const parser = new SseParser();
  const got = [...parser.feed("data: a\r"), ...parser.feed("\ndata: b\r\r\n"), ...parser.feed("data: c\r\r")];
  assert.deepEqual(got.map((m) => m.data), ["a\nb", "c"]);
});

test("an id with no data sets the last event id and dispatches nothing", () => {
  const parser = new SseParser("3");
  assert.deepEqual(parser.feed("id: 9\n\n"), []);
  assert.equal(parser.lastEventId, "9");
  assert.equal(parser.feed("data: x\n\n")[0].lastEventId, "9");
});

test("an id takes effect when its message ends: a message cut short leaves the last event id at the last whole one", () => {
  const parser = new SseParser("3");
  assert.deepEqual(parser.feed(": stream open\nid: 10\n\n"), []);
  assert.equal(parser.lastEventId, "10");
  // A batch's id and half its data, and the connection breaks: the batch was not delivered, so a reconnect
  // resumes after 10, not after 11.
  assert.deepEqual(parser.feed('id: 11\nevent: batch\ndata: {"first_id": 11, "la'), []);
  assert.equal(parser.lastEventId, "10");
  const [batch] = parser.feed('st_id": 11}\n\n');
  assert.equal(batch.lastEventId, "11");
  assert.equal(parser.lastEventId, "11");
});
