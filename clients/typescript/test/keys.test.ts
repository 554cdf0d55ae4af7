// A run's write keys are sdk.py's: the same arguments give the same key in a TypeScript run as in a Python one.
// The expected keys below are what `orchestrator/sdk.py`'s scheme gives (Python's json.dumps and hashlib).
import assert from "node:assert/strict";
import { test } from "node:test";
import { callKey, pythonJson, sha256Hex } from "../src/workflow/keys";

const CASES: Array<[string, Record<string, unknown>, string, string]> = [
  [
    "write_object",
    { alias: "summaries/orders", value: { type: "order_summary", total: 42.5, orders: ["A-1", "A-2"], note: "café ✓" }, if_rev: null },
    '["write_object", {"alias": "summaries/orders", "if_rev": null, "value": {"note": "caf\\u00e9 \\u2713", "orders": ["A-1", "A-2"], "total": 42.5, "type": "order_summary"}}]',
    "exe:x:1.0:2:ec9899cf5cdf6ece",
  ],
  [
    "post_thread_item",
    { alias: "chats/1", item: { type: "text", role: "assistant", message: 'hi\nthere "you"' } },
    '["post_thread_item", {"alias": "chats/1", "item": {"message": "hi\\nthere \\"you\\"", "role": "assistant", "type": "text"}}]',
    "exe:x:1.0:2:5d3d7f96d07e9fce",
  ],
  [
    "emit_events",
    { events: [{ type: "order.placed", data: { order: "B-7", amount: 0.0001, tiny: 1e-7, n: -3 } }] },
    '["emit_events", {"events": [{"data": {"amount": 0.0001, "n": -3, "order": "B-7", "tiny": 1e-07}, "type": "order.placed"}]}]',
    "exe:x:1.0:2:86d639a59ebdf79a",
  ],
  [
    "update_graph",
    { patch: { nodes: { a: { type: "n" }, B: null } }, if_rev: 3 },
    '["update_graph", {"if_rev": 3, "patch": {"nodes": {"B": null, "a": {"type": "n"}}}}]',
    "exe:x:1.0:2:4da576fc89fa5a9c",
  ],
];

test("the JSON a write's digest is taken of is Python's json.dumps(sort_keys=True)", () => {
  for (const [op, args, json] of CASES) assert.equal(pythonJson([op, args]), json);
});

test("a write's key is the run, its place among the calls, and the digest, as sdk.py makes it", () => {
  for (const [op, args, , key] of CASES) assert.equal(callKey("exe:x:1.0", 2, op, args), key);
});

test("floats are written as Python's repr writes them; a number with no fraction as an integer", () => {
  const cases: Array<[number, string]> = [
    [1.5, "1.5"], [0.1, "0.1"], [1e-5, "1e-05"], [1.25e-7, "1.25e-07"], [123.456, "123.456"],
    [1.5e-16, "1.5e-16"], [-2.5, "-2.5"], [1e22, "10000000000000000000000"], [0.0001, "0.0001"],
  ];
  for (const [value, text] of cases) assert.equal(pythonJson(value), text, String(value));
});

test("sha256 is SHA-256", () => {
  assert.equal(sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  assert.equal(sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  assert.equal(sha256Hex("x".repeat(1000)).length, 64);
});
