// The detail view: an object's value, a thread's items and each item whole, and an event whole with what
// routing made of it, what caused it and what it caused (`explain_event`), every event in it one click away.
// A detail is read when it is opened and stays as read: the live refresh never replaces it under the reader.

import { inSession } from "./api.js";
import { actButton, brief, clock, el, node, opener, pre } from "./dom.js";
import { executionLink, runState } from "./listeners.js";
import { who } from "./stream.js";

// Thread items as last read, by id, so an item opens whole without another read.
const items = new Map();
// Runs as the page last read them (`list_executions`), by id: a run in a cause chain shows its own end.
let runs = new Map();
export function knowRuns(known) {
  runs = known;
}

function open(title, ...children) {
  el("detail-title").textContent = title;
  el("detail-body").replaceChildren(...children);
  el("detail").hidden = false;
  el("detail").scrollTop = 0;
}

export function close() {
  el("detail").hidden = true;
}

function failed(title, err) {
  open(title, node("p", { class: "error", text: String(err.message || err) }));
}

export async function openObject(alias) {
  let found;
  try {
    found = (await inSession("read_object", { alias })).object;
  } catch (err) {
    return failed(`object ${alias}`, err);
  }
  open(`object ${alias}`,
    node("p", { class: "muted", text: `rev ${found.rev}, written ${found.updated_at || ""}` }),
    node("div", { class: "object-value" }, pre(found.value)),
    actButton("Edit in the form", "edit-object", { alias, rev: found.rev }));
  return found;
}

export async function openThread(alias, after = null) {
  let found;
  try {
    found = (await inSession("list_thread_items", { alias, limit: 100, ...(after ? { after } : {}) })).items;
  } catch (err) {
    return failed(`thread ${alias}`, err);
  }
  for (const item of found) items.set(item.id, { ...item, alias });
  const rows = found.map((item) => node("li", { "data-item": item.id },
    clock(item.created_at), " ",
    opener(`${item.type}${item.role ? `/${item.role}` : ""}`, "item", item.id), " ",
    node("span", { text: brief(item.message, 120) })));
  const more = found.length === 100 ? actButton("next 100", "more-items", { alias, after: found[found.length - 1].id }) : "";
  open(`thread ${alias}`,
    node("p", { class: "muted", text: after ? `items after ${after}` : `the first ${found.length} items, oldest first` }),
    node("ol", { class: "items" }, ...rows), more,
    actButton("Post on this thread", "post-to", { alias }));
}

export function openItem(id) {
  const item = items.get(id);
  if (!item) return failed(`item ${id}`, new Error("not read yet: open its thread"));
  open(`item ${id} on ${item.alias}`,
    node("p", {}, `posted ${item.created_at}, `, opener(`event ${item.event_id}`, "event", item.event_id)),
    pre(item));
}

// One step back in `caused_by`: the request, schedule or silence it started from, a run, a batch, an event.
function causeStep(step) {
  if (step.event) return node("li", {}, opener(`event ${step.event.id}`, "event", step.event.id), ` ${step.event.type} ${step.event.alias || ""} ${who(step.event.actor)}`);
  if (step.run) return node("li", {}, "run ", executionLink(step.run.execution_id, true), ` ${step.run.workflow || ""} `, runState(runs.get(step.run.execution_id)));
  if (step.batch) return node("li", { text: `batch of ${step.batch.listener}, lane ${step.batch.lane}, events ${step.batch.first_id}..${step.batch.last_id}, retry ${step.batch.retry}` });
  if (step.request) return node("li", { text: `the outside request ${step.request.id || ""}${step.request.key ? ` by key ${step.request.key}` : ""}` });
  if (step.schedule) return node("li", { text: `${step.schedule.set_by ? "the timer the run below set," : "the schedule"} ${step.schedule.alias || brief(step.schedule)}${step.schedule.due_at ? `, due ${step.schedule.due_at}` : ""}` });
  if (step.idle) return node("li", { text: `a lane's silence: ${brief(step.idle)}` });
  return node("li", { text: brief(step) });
}

// What an event caused: the batches that took it, their runs, and what those wrote, each with its own.
function causedTree(nodes) {
  return node("ul", { class: "caused" }, ...nodes.map((n) => node("li", {},
    node("span", { text: `batch of ${n.batch.listener}, lane ${n.batch.lane}, events ${n.batch.first_id}..${n.batch.last_id}, retry ${n.batch.retry}` }),
    n.runs.length ? node("div", {}, "run ", ...n.runs.flatMap((id) => [executionLink(id, true), " ", runState(runs.get(id)), " "])) : "",
    n.wrote.length ? node("ul", {}, ...n.wrote.map((w) => node("li", {},
      "wrote ", opener(`event ${w.event.id}`, "event", w.event.id), ` ${w.event.type} ${w.event.alias || ""} ${who(w.event.actor)}`,
      w.caused && w.caused.length ? causedTree(w.caused) : ""))) : "",
    n.truncated ? node("div", { class: "muted", text: "(more, not shown)" }) : "")));
}

function decision(d) {
  if (!d.matched) return node("li", { text: `${d.listener}: not matched (${d.reason}): ${d.message}` });
  const flags = [d.switched_off ? "switched off" : "", d.paused ? "paused" : "", d.routed === false ? "not routed yet" : ""].filter(Boolean);
  const batches = (d.batches || []).map((b) => {
    const o = b.outcome;
    const said = o ? `${o.status}${o.reason ? ` (${o.reason})` : ""}${o.message ? `: ${o.message}` : ""}` : b.state;
    return node("li", {}, `batch ${b.first_id}..${b.last_id} retry ${b.retry}: ${said} `,
      o && o.execution_id ? executionLink(o.execution_id, true) : "", " ", o && o.execution_id ? runState(runs.get(o.execution_id)) : "");
  });
  return node("li", {}, `${d.listener} v${d.version}: matched, lane ${d.lane}${flags.length ? ` (${flags.join(", ")})` : ""}`,
    batches.length ? node("ul", {}, ...batches) : node("span", { class: "muted", text: d.queued ? ", waiting in its lane" : "" }));
}

export async function openEvent(id) {
  let found;
  try {
    found = await inSession("explain_event", { event_id: Number(id) });
  } catch (err) {
    return failed(`event ${id}`, err);
  }
  const e = found.event;
  open(`event ${e.id}: ${e.type}${e.alias ? ` ${e.alias}` : ""}`,
    node("h4", { text: "What caused it" }),
    found.caused_by.length ? node("ol", { class: "caused-by" }, ...found.caused_by.map(causeStep)) : node("p", { class: "muted", text: "nothing recorded" }),
    node("h4", { text: "What it caused" }),
    found.caused.length ? causedTree(found.caused) : node("p", { class: "muted", text: "no batch took it (yet)" }),
    node("h4", { text: "Listeners" }),
    node("ul", { class: "decisions" }, ...found.listeners.map(decision)),
    node("h4", { text: "The event" }),
    pre(e));
}
