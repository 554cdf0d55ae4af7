// The dashboard: sessions, their listeners' lanes and why each waits, outcomes, executions, schedules and
// the live stream. It reads the same commands as every door (POST /v1/commands) and follows the session as a
// connection listener (GET /v1/sessions/{id}/stream); the page never reloads.
// Where the API needs a key, the page signs in with one (POST /dashboard/sign-in) and holds no secret itself:
// the browser keeps an HttpOnly cookie that this script cannot read, each command carries the session's CSRF
// token, and the stream opens with a single-use ticket (POST /v1/stream-tickets), never a key in a URL.
"use strict";

const REFRESH_MS = 2000;
const STREAM_KEPT = 200;
let config = { token_required: false, signed_in: null, csrf: null, temporal_ui: null, namespace: "default" };
let current = null;
let stream = null;
let timer = null;

const el = (id) => document.getElementById(id);
function node(tag, attrs = {}, ...children) {
  const n = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") n.className = v; else if (k === "text") n.textContent = v; else n.setAttribute(k, v);
  }
  for (const child of children) n.append(child);
  return n;
}

// A POST of JSON with the browser session's CSRF token (the cookie goes with it by itself, same origin only).
async function post(path, body) {
  const headers = { "content-type": "application/json" };
  if (config.csrf) headers["x-csrf-token"] = config.csrf;
  const response = await fetch(path, { method: "POST", headers, body: JSON.stringify(body), credentials: "same-origin" });
  const reply = await response.json();
  if (response.status === 401 || (response.status === 403 && reply.error === "unauthorized")) askToSignIn(reply.message);
  if (reply.status !== "success") throw new Error(`${reply.error}: ${reply.message}`);
  return reply;
}

async function command(body) {
  const reply = await post("/v1/commands", body);
  el("connection").textContent = "live";
  return reply;
}

function askToSignIn(message) {
  config.signed_in = null;
  config.csrf = null;
  showWho();
  el("sign-in").hidden = false;
  el("connection").textContent = message || "sign in with an API key";
}

function showWho() {
  el("signed-in").hidden = !config.signed_in;
  el("who").textContent = config.signed_in ? `signed in as ${config.signed_in}` : "";
}

function executionLink(id) {
  if (!config.temporal_ui) return node("span", { text: id });
  const href = `${config.temporal_ui}/namespaces/${encodeURIComponent(config.namespace)}/workflows/${encodeURIComponent(id)}`;
  return node("a", { href, target: "_blank", class: "execution-link", text: id });
}

// Why a lane is not firing, in the platform's words (`list_session_listeners` says it for every door).
function why(lane) {
  if (lane.waiting) return lane.waiting.text;
  const running = (lane.runs_in_flight || []).filter((r) => r.state === "running");
  if (running.length) return `run in flight: ${running.map((r) => r.execution_id).join(", ")}`;
  return "idle";
}

// Replaces a container's children only when what they show has changed: a refresh that brought nothing new
// leaves the nodes in place, so a link under the pointer, a selection or a hover survives it.
function show(container, children) {
  const fresh = children.map((child) => child.outerHTML).join("");
  if (container.innerHTML !== fresh) container.replaceChildren(...children);
}

async function refreshSessions() {
  const { sessions } = await command({ command: "list_sessions", limit: 50 });
  const list = el("sessions");
  show(list, sessions.map((s) => {
    const item = node("li", { "data-session": s.id, class: s.id === current ? "selected" : "", text: `${s.alias || s.id} (${s.status}${s.draining ? ", draining" : ""})` });
    item.addEventListener("click", () => select(s.id, s.alias));
    return item;
  }));
}

// One refresh of the session at a time: a trigger during a refresh (a stream message, the timer) asks for one
// more after it, so the page always ends on what was read after the last trigger, and an older answer that
// comes back late never lands over a newer one.
let refreshing = null;
let refreshAgain = false;

function refreshSession() {
  if (refreshing) {
    refreshAgain = true;
    return refreshing;
  }
  refreshing = (async () => {
    try {
      do {
        refreshAgain = false;
        await renderSession();
      } while (refreshAgain);
    } finally {
      refreshing = null;
    }
  })();
  return refreshing;
}

async function renderSession() {
  if (!current) return;
  const sid = current;
  const [{ listeners }, declared, { executions }, { schedules }] = await Promise.all([
    command({ command: "list_session_listeners", session_id: sid }),
    command({ command: "list_listeners" }),
    command({ command: "list_executions", session_id: sid }),
    command({ command: "list_schedules", session_id: sid }),
  ]);
  const bodies = Object.fromEntries(declared.listeners.map((l) => [l.name, l.body]));
  show(el("listeners"), listeners.map((l) => {
    const body = bodies[l.name] || {};
    const lanes = node("table", { class: "lanes" }, node("tr", {}, ...["lane", "pending", "in flight", "why it waits"].map((h) => node("th", { text: h }))));
    for (const lane of l.lanes) {
      lanes.append(node("tr", { "data-lane": lane.lane },
        node("td", { text: lane.lane }), node("td", { class: "pending", text: String(lane.pending) }),
        node("td", { text: String(lane.in_flight) }), node("td", { class: "lane-why", text: why(lane) })));
    }
    const outcomes = node("table", { class: "outcomes" }, node("tr", {}, ...["at", "status", "lane", "events", "retry", "execution / message"].map((h) => node("th", { text: h }))));
    for (const o of l.recent_outcomes.slice(0, 10)) {
      outcomes.append(node("tr", {},
        node("td", { text: o.created_at }), node("td", { class: `status-${o.status}`, text: o.status + (o.reason ? ` (${o.reason})` : "") }),
        node("td", { text: o.lane }), node("td", { text: `${o.first_id}..${o.last_id}` }), node("td", { text: String(o.retry) }),
        node("td", {}, o.execution_id ? executionLink(o.execution_id) : node("span", { text: o.message || "" }))));
    }
    const counts = Object.entries(l.counts).map(([k, v]) => `${k} ${v}`).join(", ") || "no outcomes yet";
    const receipt = body.receipt ? `receipts on ${body.receipt.alias}` : "no receipts";
    return node("div", { class: "listener", "data-listener": l.name },
      node("h4", { text: `${l.name} v${l.version} ${l.enabled ? "" : "(switched off)"}` }),
      node("div", { class: "muted", text: `${(body.concurrency && body.concurrency.mode) || "serial"}, window ${(body.batch && body.batch.window_seconds) || 0} s; ${counts}; ${receipt}` }),
      lanes, outcomes);
  }));
  show(el("executions").tBodies[0], executions.slice(-50).reverse().map((e) => node("tr", {},
    node("td", {}, executionLink(e.id)), node("td", { text: e.workflow }), node("td", { text: e.listener || "" }),
    node("td", { class: `status-${e.status}`, text: e.status }),
    node("td", { text: e.batch ? `${e.batch.first_id}..${e.batch.last_id} retry ${e.batch.retry}` : "" }),
    node("td", { text: e.started_at }))));
  const rows = await Promise.all(schedules.map(async (s) => {
    let next = "";
    try { next = ((await command({ command: "get_schedule", session_id: sid, alias: s.alias })).schedule.next_invocations || []).slice(0, 3).join(", "); } catch (err) { next = String(err); }
    const repeat = s.repeat.type === "interval" ? `every ${s.repeat.every_seconds} s` : (s.repeat.cron_expression || s.repeat.invocation_time);
    return node("tr", {}, node("td", { text: s.alias }), node("td", { text: repeat }),
      node("td", { text: s.target.alias || s.target.workflow || "" }), node("td", { text: next }));
  }));
  show(el("schedules").tBodies[0], rows);
}

// The stream reconnects by itself (EventSource sends Last-Event-ID) after a network error or a stopping
// server's last message (`event: shutdown`); only a stream the browser gave up on (an HTTP error while the
// platform restarts) is opened again here, after the last event shown.
const STREAM_RETRY_MS = 2000;
let streamSeen = 0;

// Where a key is needed, each opening takes a fresh single-use ticket; the browser's own reconnection would
// present a used one, so a ticketed stream that fails is closed here and opened again after what it showed.
// `following` numbers the openings: only the newest one may open a stream or try again.
let following = 0;

async function follow(sid, after) {
  const mine = ++following;
  if (stream) stream.close();
  stream = null;
  const again = () => setTimeout(() => { if (mine === following && current === sid) follow(sid, streamSeen); }, STREAM_RETRY_MS);
  const params = new URLSearchParams();
  if (after) params.set("after", String(after));
  const ticketed = config.token_required;
  if (ticketed) {
    try {
      params.set("ticket", (await post("/v1/stream-tickets", { session_id: sid })).ticket);
    } catch (err) {
      // Signed out: signing in follows again. Otherwise the platform is away for now: try again.
      if (config.signed_in) {
        el("connection").textContent = "stream reconnecting…";
        again();
      }
      return;
    }
    if (mine !== following || current !== sid) return;
  }
  const opened = new EventSource(`/v1/sessions/${encodeURIComponent(sid)}/stream?${params}`);
  stream = opened;
  opened.addEventListener("batch", (message) => {
    const data = JSON.parse(message.data);
    streamSeen = Math.max(streamSeen, data.last_id);
    const list = el("stream");
    for (const e of data.events) {
      const actor = e.actor ? `by ${Object.entries(e.actor).map(([k, v]) => `${k} ${v}`).join(", ")}` : "";
      const what = [e.id, e.type, e.alias || "", e.item ? `${e.item.type}/${e.item.role || ""}` : "", e.execution ? `${e.execution.id} ${e.execution.status}` : "", actor].join("  ");
      list.prepend(node("li", { "data-event": String(e.id), text: what }));
    }
    while (list.children.length > STREAM_KEPT) list.lastChild.remove();
    refreshSession().catch(() => {});
  });
  opened.addEventListener("shutdown", () => { el("connection").textContent = "platform stopping; reconnecting…"; });
  opened.onopen = () => { el("connection").textContent = "live"; };
  opened.onerror = () => {
    el("connection").textContent = "stream reconnecting…";
    if (ticketed) opened.close();
    if ((ticketed || opened.readyState === EventSource.CLOSED) && stream === opened) again();
  };
}

async function select(sid, alias) {
  current = sid;
  if (!alias) {
    const shown = [...el("sessions").children].find((item) => item.dataset.session === sid);
    alias = shown ? shown.textContent.replace(/ \(.*\)$/, "") : sid;
  }
  el("session").hidden = false;
  el("session-title").textContent = `Session ${alias || sid}`;
  el("stream").replaceChildren();
  streamSeen = 0;
  for (const item of el("sessions").children) item.classList.toggle("selected", item.dataset.session === sid);
  follow(sid);
  await refreshSession();
}

async function tick() {
  try {
    await refreshSessions();
    await refreshSession();
  } catch (err) {
    el("connection").textContent = String(err);
  }
}

el("sign-in").addEventListener("submit", async (e) => {
  e.preventDefault();
  const key = el("key");
  try {
    const reply = await post("/dashboard/sign-in", { key: key.value });
    config.signed_in = reply.signed_in;
    config.csrf = reply.csrf;
  } catch (err) {
    el("connection").textContent = String(err);
    return;
  } finally {
    key.value = "";
  }
  el("sign-in").hidden = true;
  showWho();
  if (current) follow(current, streamSeen);
  tick();
});

el("sign-out").addEventListener("click", async () => {
  try { await post("/dashboard/sign-out", {}); } catch (err) { /* signed out either way */ }
  if (stream) stream.close();
  stream = null;
  askToSignIn("signed out");
});

(async () => {
  config = await (await fetch("/dashboard/config", { credentials: "same-origin" })).json();
  showWho();
  if (config.token_required && !config.signed_in) askToSignIn();
  timer = setInterval(tick, REFRESH_MS);
  await tick();
  const wanted = new URLSearchParams(location.search).get("session");
  if (wanted) await select(wanted).catch((err) => { el("connection").textContent = String(err); });
})();
