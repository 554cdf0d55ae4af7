// What the page can do, with a key that may: write an object, post a thread item, emit an event, pause and
// resume a listener in the session, replay a batch, and try a listener's body on the session's stream. Each is
// one command through `api.js` (so it carries the CSRF token a signed-in browser needs); a refusal is shown as
// the platform said it (`access_denied: ...`), and nothing is retried behind the user's back.

import { CLIENT, inSession, state } from "./api.js";
import { el } from "./dom.js";
import { close, openEvent, openItem, openObject, openThread } from "./details.js";
import { drawSimulation } from "./timeline.js";

// Set by the page: what to do once a write went through (read the session again), and a listener's body.
export const hooks = { changed: () => {}, body: () => null };

// An answer beside what asked for it: `ok` true or false, or null while the command is on its way.
function say(where, text, ok) {
  const out = el(where);
  out.textContent = text;
  out.classList.toggle("error", ok === false);
  out.classList.toggle("ok", ok === true);
}

// A JSON field of a form, or the reason it is not JSON (the field named as the platform would).
function parsed(text, field) {
  try {
    return { value: JSON.parse(text) };
  } catch (err) {
    return { error: `${field}: not valid JSON (${err.message})` };
  }
}

async function run(where, body, done) {
  say(where, "…", null);
  try {
    const reply = await inSession(body.command, body);
    say(where, done(reply), true);
    hooks.changed(body.command);
    return reply;
  } catch (err) {
    say(where, String(err.message || err), false);
    return null;
  }
}

async function writeObject(form) {
  const value = parsed(form.value.value, "value");
  if (value.error) return say("object-result", value.error, false);
  const body = { command: "write_object", alias: form.alias.value.trim(), value: value.value, client: CLIENT };
  if (form.if_rev.value !== "") body.if_rev = Number(form.if_rev.value);
  const reply = await run("object-result", body, (r) => `wrote ${r.object.alias}, rev ${r.object.rev} (event ${r.event_id})`);
  if (reply) form.if_rev.value = String(reply.object.rev);
}

async function postItem(form) {
  const item = { type: form.type.value.trim() };
  if (form.role.value.trim()) item.role = form.role.value.trim();
  if (item.type === "json") {
    const message = parsed(form.message.value, "item.message");
    if (message.error) return say("item-result", message.error, false);
    item.message = message.value;
  } else {
    item.message = form.message.value;
  }
  const body = { command: "post_thread_item", alias: form.alias.value.trim(), item, client: CLIENT };
  const reply = await run("item-result", body, (r) => `posted item ${r.item.id} on ${body.alias} (event ${r.event_id})`);
  if (reply) form.message.value = "";
}

async function emitEvent(form) {
  const data = parsed(form.data.value, "data");
  if (data.error) return say("emit-result", data.error, false);
  const body = { command: "emit_event", type: form.type.value, data: data.value, client: CLIENT };
  await run("emit-result", body, (r) => `emitted ${body.type} (event ${r.event_id})`);
}

async function simulate(form) {
  const listener = parsed(form.body.value, "listener");
  if (listener.error) return say("simulate-result", listener.error, false);
  const body = { command: "simulate_listener", listener: listener.value };
  if (form.after.value !== "") body.after = Number(form.after.value);
  if (form.before.value !== "") body.before = Number(form.before.value);
  if (form.run_seconds.value !== "") body.run_seconds = Number(form.run_seconds.value);
  say("simulate-result", "simulating…", null);
  el("timeline").replaceChildren();
  try {
    const found = await inSession("simulate_listener", body);
    say("simulate-result", `${found.batches.length} batches from ${found.matched} of ${found.events} events${found.truncated ? " (cut short)" : ""}`, true);
    drawSimulation(found);
  } catch (err) {
    say("simulate-result", String(err.message || err), false);
  }
}

const forms = { "object-form": writeObject, "item-form": postItem, "emit-form": emitEvent, "simulate-form": simulate };

// A replay runs a batch's action again (its writes, its workflow): the first click asks, a second within
// CONFIRM_MS does it. Kept by what it replays, not on the node, which a live refresh may replace in between.
const CONFIRM_MS = 5000;
let armed = { key: null, until: 0 };

function confirmed(key, question) {
  if (armed.key === key && Date.now() < armed.until) {
    armed = { key: null, until: 0 };
    return true;
  }
  armed = { key, until: Date.now() + CONFIRM_MS };
  say("notice", question, null);
  return false;
}

// A button's act, by its `data-act` and the arguments beside it (the node may be one a refresh replaced).
async function act(button) {
  const d = button.dataset;
  if (d.act === "pause" || d.act === "resume") {
    const name = `${d.act}_listener`;
    await run("notice", { command: name, name: d.listener }, () => `${d.listener} ${d.act === "pause" ? "paused" : "resumed"} in this session`);
  } else if (d.act === "replay") {
    const question = `Replay ${d.listener}'s batch ${d.batch}? Its action runs again. Click Replay again to confirm.`;
    if (!confirmed(`${d.listener}/${d.batch}`, question)) return;
    await run("notice", { command: "replay_batch", listener: d.listener, batch: Number(d.batch), client: CLIENT },
      (r) => `replay of ${d.listener}'s batch ${d.batch} asked for, lane ${r.replay.lane} (event ${r.event_id})`);
  } else if (d.act === "try") {
    const body = hooks.body(d.listener);
    el("simulate-form").body.value = JSON.stringify(body, null, 2);
    el("simulate-panel").open = true;
    el("simulate-panel").scrollIntoView({ block: "nearest" });
  } else if (d.act === "edit-object") {
    const form = el("object-form");
    const value = el("detail-body").querySelector(".object-value pre").textContent;
    form.alias.value = d.alias;
    form.value.value = value;
    form.if_rev.value = d.rev;
    el("write-object").open = true;
    close();
    form.value.focus();
  } else if (d.act === "post-to") {
    el("item-form").alias.value = d.alias;
    el("post-item").open = true;
    close();
    el("item-form").message.focus();
  } else if (d.act === "more-items") {
    await openThread(d.alias, d.after);
  }
}

const openers = { object: openObject, thread: openThread, item: openItem, event: openEvent };

export function wire() {
  document.addEventListener("click", (e) => {
    const target = e.target instanceof Element ? e.target : null;
    const link = target && target.closest("[data-open]");
    if (link) {
      e.preventDefault();
      if (state.current) openers[link.dataset.open](link.dataset.id);
      return;
    }
    const button = target && target.closest("button[data-act]");
    if (button && state.current) act(button);
  });
  for (const [id, handler] of Object.entries(forms)) {
    el(id).addEventListener("submit", (e) => {
      e.preventDefault();
      if (state.current) handler(e.target);
    });
  }
  // A guard on a rev is for the object it was read from: another alias typed in drops it.
  const objectForm = el("object-form");
  objectForm.alias.addEventListener("input", () => { objectForm.if_rev.value = ""; });
  el("detail-close").addEventListener("click", close);
  document.addEventListener("keydown", (e) => { if (e.key === "Escape") close(); });
}
