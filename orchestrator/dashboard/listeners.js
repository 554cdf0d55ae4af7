// A listener as the page shows it: its declaration in words (filter, concurrency, batch, action, retry,
// receipt), its lanes and why each waits, and its recent outcomes, each beside its own run's status and error:
// an outcome `success` only says the action was accepted; the run it started may have failed since.

import { state } from "./api.js";
import { actButton, brief, clock, node, opener, withClocks } from "./dom.js";

const list = (values) => values.join(", ");

export function describeFilter(filter = {}) {
  const parts = [filter.types ? `types ${list(filter.types)}` : "every type"];
  parts.push(filter.aliases ? `aliases ${list(filter.aliases)}` : "any alias");
  for (const w of filter.where || []) parts.push(`where ${w.path} ${w.op}${w.op === "exists" ? "" : ` ${brief(JSON.stringify(w.value), 60)}`}`);
  return parts.join("; ");
}

export function describeConcurrency(c = {}) {
  const mode = c.mode || "serial";
  if (mode === "keyed") {
    const cut = c.key_segments ? ` (first ${c.key_segments} segments)` : "";
    return `keyed by ${c.key}${cut}, at most ${c.max_parallel || 4} keys at once`;
  }
  if (mode === "parallel") return `parallel, up to ${c.max_parallel || 4} runs at once`;
  if (mode === "none") return "none (a connection listener)";
  return "serial, one run at a time";
}

export function describeBatch(b = {}) {
  const parts = [`window ${b.window_seconds || 0} s`, `up to ${b.max_events || 100} events`];
  if (b.distinct_by) parts.push(`distinct by ${b.distinct_by}`);
  if (b.debounce_seconds) parts.push(`debounce ${b.debounce_seconds} s`);
  if (b.max_wait_seconds) parts.push(`at most ${b.max_wait_seconds} s after the first`);
  return parts.join(", ");
}

export function describeAction(a = {}) {
  if (a.type === "workflow") return `workflow ${a.workflow}${a.input === undefined ? "" : `, input ${brief(a.input)}`}`;
  if (a.type === "thread_item") return `post on ${a.alias}: ${brief(a.item)}`;
  if (a.type === "object") return `write ${a.alias}: ${brief(a.value)}`;
  return brief(a);
}

function declaration(body) {
  const rows = [
    ["filter", describeFilter(body.filter)],
    ["concurrency", describeConcurrency(body.concurrency)],
    ["batch", describeBatch(body.batch)],
    ["action", describeAction(body.action)],
  ];
  if (body.retry) rows.push(["retry", `a failed run's batch again up to ${body.retry.attempts} times, after ${body.retry.delay_seconds ?? 30} s, doubling`]);
  if (body.receipt) rows.push(["receipt", `on ${body.receipt.alias}`]);
  if (body.idle) rows.push(["idle", `after ${body.idle.after_seconds} s without an event`]);
  return node("dl", { class: "declaration" }, ...rows.flatMap(([k, v]) => [node("dt", { text: k }), node("dd", { class: k, text: v })]));
}

// A run's id without the session's part (`exe:SESSION:listener:lane:batch.retry`): the page shows one session.
export function runLabel(id) {
  const prefix = `exe:${state.current}:`;
  return id.startsWith(prefix) ? id.slice(prefix.length) : id;
}

// A run, linked into the Temporal UI when the page knows where it is; `short` leaves the session's part out.
export function executionLink(id, short = false) {
  const text = short ? runLabel(id) : id;
  if (!state.config.temporal_ui) return node("span", { title: id, text });
  const { temporal_ui, namespace } = state.config;
  const href = `${temporal_ui}/namespaces/${encodeURIComponent(namespace)}/workflows/${encodeURIComponent(id)}`;
  return node("a", { href, target: "_blank", rel: "noopener", class: "execution-link", title: id, text });
}

// Why a lane is not firing, in the platform's words (`list_session_listeners` says it for every door).
function why(lane) {
  if (lane.waiting) return lane.waiting.text;
  const running = (lane.runs_in_flight || []).filter((r) => r.state === "running");
  if (running.length) return `run in flight: ${running.map((r) => r.execution_id).join(", ")}`;
  return "idle";
}

// A run's own end, as `list_executions` recorded it: what an outcome's status alone cannot say.
export function runState(run) {
  if (!run) return node("span", { class: "run-state muted", text: "" });
  const text = run.error ? `run ${run.status}: ${run.error}` : `run ${run.status}`;
  if (!run.waiting) return node("span", { class: `run-state status-${run.status}`, text });
  // A run that waits for events says on what: each condition's types and aliases, until when.
  const on = run.waiting.conditions.map((c) => (c.types || []).join(",") + (c.aliases ? ` on ${c.aliases.join(",")}` : ""));
  return node("span", { class: `run-state status-${run.status}`, "data-waiting": String(run.waiting.seq) },
    `${text}, waits for ${on.join(" | ")} after event ${run.waiting.after} until `, clock(run.waiting.deadline));
}

function outcomeRow(listener, o, runs) {
  const run = o.execution_id ? runs.get(o.execution_id) : null;
  const status = o.status + (o.reason ? ` (${o.reason})` : "") + (o.replay ? ` (replay ${o.replay})` : "");
  const said = o.execution_id ? node("div", {}, executionLink(o.execution_id, true), " ", runState(run)) : node("span", { text: o.message || "" });
  const count = (o.event_ids || []).length;
  return node("tr", { "data-outcome": `${o.first_id}.${o.retry}${o.replay ? `.r${o.replay}` : ""}` },
    node("td", {}, clock(o.created_at)),
    node("td", { class: `status-${o.status}`, text: status }),
    node("td", { text: o.lane }),
    node("td", { title: `${count} event${count === 1 ? "" : "s"}` }, opener(String(o.first_id), "event", o.first_id), o.last_id !== o.first_id ? `..${o.last_id}` : ""),
    node("td", { text: String(o.retry) }),
    node("td", { class: "run" }, said),
    node("td", {}, actButton("replay", "replay", { listener, batch: o.first_id })));
}

// The most lanes a card lists: a keyed listener may have a lane per chat, hundreds of them, most idle at any time.
// Those with something to say come first (waiting, running, with events pending), then idle ones; the rest are
// counted in a last row (`orchestrator status` and `list_session_listeners` list every one).
const LANES_SHOWN = 20;

function laneRows(all) {
  const idle = (lane) => why(lane) === "idle" && !lane.pending;
  const ordered = [...all.filter((lane) => !idle(lane)), ...all.filter(idle)];
  const rows = ordered.slice(0, LANES_SHOWN).map((lane) => node("tr", { "data-lane": lane.lane },
    node("td", { text: lane.lane }), node("td", { class: "pending", text: String(lane.pending) }),
    node("td", { text: String(lane.in_flight) }), node("td", { class: "lane-why" }, ...withClocks(why(lane)))));
  const rest = ordered.slice(LANES_SHOWN);
  if (rest.length) {
    const resting = rest.filter(idle).length;
    const said = `${rest.length} more lane${rest.length === 1 ? "" : "s"}${resting === rest.length ? ", idle" : `, ${resting} of them idle`}`;
    rows.push(node("tr", { class: "more-lanes" }, node("td", { colspan: 4, class: "muted", text: said })));
  }
  return rows;
}

export function listenerCard(l, body, runs) {
  const lanes = node("table", { class: "lanes" },
    node("tr", {}, ...["lane", "pending", "in flight", "why it waits"].map((h) => node("th", { text: h }))),
    ...laneRows(l.lanes));
  const outcomes = node("table", { class: "outcomes" },
    node("tr", {}, ...["at", "outcome", "lane", "events", "retry", "run", ""].map((h) => node("th", { text: h }))));
  for (const o of l.recent_outcomes.slice(0, 10)) outcomes.append(outcomeRow(l.name, o, runs));
  const counts = Object.entries(l.counts).map(([k, v]) => `${k} ${v}`).join(", ") || "no outcomes yet";
  const flags = [l.enabled ? null : "switched off", l.paused ? "paused" : null].filter(Boolean);
  const clean = l.lanes.length === 0 && l.recent_outcomes.length === 0;
  return node("div", { class: "listener", "data-listener": l.name, "data-paused": l.paused ? "yes" : "no" },
    node("h4", {},
      node("span", { class: "name", text: `${l.name} v${l.version}` }), " ",
      flags.length ? node("span", { class: "badge", text: flags.join(", ") }) : "",
      node("span", { class: "tools" },
        l.paused ? actButton("Resume", "resume", { listener: l.name }) : actButton("Pause", "pause", { listener: l.name }),
        actButton("Try…", "try", { listener: l.name }))),
    declaration(body),
    ...(l.warnings || []).map((w) => node("p", { class: "warning", text: w })),
    node("div", { class: "muted counts", text: counts }),
    clean ? node("p", { class: "muted", text: "no lane yet: no event has matched it in this session" }) : lanes,
    l.recent_outcomes.length ? outcomes : "");
}
