// The dashboard: sessions, their listeners (declaration, lanes and why each waits, outcomes beside their runs),
// their runs on a time axis and the session's pace over the last hour (`runs_timeline.js`, `rates.js`), executions,
// objects, threads, schedules and the live stream, refreshed live without a reload; and, with a key
// that may, writes, pauses, resumes and replays (`actions.js`). It opens the newest open session, or the one
// in `?session=`, and keeps the address on the session shown, so a reload or a shared link shows it again.

import { command, inSession, loadConfig, post, Stale, state, whenSignedOut } from "./api.js";
import { wire, hooks } from "./actions.js";
import { knowRuns, openThread } from "./details.js";
import { clock, el, node, opener, show } from "./dom.js";
import { executionLink, listenerCard, runState } from "./listeners.js";
import { newestFrom } from "./newest.js";
import { drawRates, readEvents, samplePending } from "./rates.js";
import { drawRuns } from "./runs_timeline.js";
import { restart, stop, streaming, whenBatch } from "./stream.js";

const REFRESH_MS = 2000;
// How many of the newest events the stream shows at once when a session opens.
const RECENT_EVENTS = 50;
// Thread aliases are learnt from this many of the newest items posted (at most a page), and from the stream after.
const THREADS_LOOKBACK = 1000;
const OBJECTS_SHOWN = 200;

let sessions = [];
let bodies = {};
let threads = new Set();
let objectsStale = true;
// Signed out (or never signed in where a key is needed): nothing is asked of the API until a key signs in.
let signedOut = false;
// Sessions asked for by the address that are not there: said once, not asked again at every refresh.
const missing = new Set();

function showWho() {
  el("signed-in").hidden = !state.config.signed_in;
  el("who").textContent = state.config.signed_in ? `signed in as ${state.config.signed_in}` : "";
}

// Nothing of a session stays on screen once signed out (a revoked key, the sign-out button), and the page's
// refreshes ask nothing more of the API until a key signs in: every ask would be refused, and its refusal would
// cover these words. An answer to what was asked before (a refresh in flight) is dropped (`Stale`), and once signed
// out only the sign-out button's own words replace what was said.
const SIGNED_OUT = "signed out";
function askToSignIn(message) {
  const said = signedOut;
  signedOut = true;
  stop();
  showWho();
  el("sign-in").hidden = false;
  el("session").hidden = true;
  el("sessions").replaceChildren();
  if (!said || message === SIGNED_OUT) el("connection").textContent = message || "sign in with an API key";
}

async function refreshSessions() {
  const listed = (await command({ command: "list_sessions", limit: 50 })).sessions;
  if (signedOut) return; // answered before a sign-out, come back after it: not shown
  sessions = listed;
  show(el("sessions"), sessions.map((s) => node("li", {
    "data-session": s.id,
    class: s.id === state.current ? "selected" : "",
    text: `${s.alias || s.id} (${s.status}${s.draining ? ", draining" : ""})`,
  })));
}

// One refresh of the session at a time: a trigger during a refresh (a stream message, the timer, a write)
// asks for one more after it, so the page always ends on what was read after the last trigger, and an older
// answer that comes back late never lands over a newer one.
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

// A session as the list tells it; one the list does not hold (older than its newest 50) asked for by its id.
async function sessionOf(sid) {
  return sessions.find((s) => s.id === sid) || (await command({ command: "get_session", session_id: sid })).session;
}

async function renderSession() {
  if (!state.current) return;
  const sid = state.current;
  const known = await sessionOf(sid);
  if (sid !== state.current || signedOut) return;
  const [{ listeners }, declared, executions, { schedules }] = await Promise.all([
    inSession("list_session_listeners"),
    command({ command: "list_listeners" }),
    readRuns(),
    inSession("list_schedules"),
    readEvents(sid, known.last_event_id),
  ]);
  if (sid !== state.current || signedOut) return;
  samplePending(sid, listeners);
  drawRuns(executions, listeners.map((l) => l.name), el("executions-more").textContent);
  drawRates(sid);
  bodies = Object.fromEntries(declared.listeners.map((l) => [l.name, l.body]));
  const runs = new Map(executions.map((e) => [e.id, e]));
  knowRuns(runs);
  show(el("listeners"), listeners.length
    ? listeners.map((l) => listenerCard(l, bodies[l.name] || {}, runs))
    : [node("p", { class: "muted", text: "no listener saved yet (save_listener)" })]);
  show(el("executions").tBodies[0], executions.slice(-50).reverse().map((e) => node("tr", { "data-execution": e.id },
    node("td", {}, executionLink(e.id)), node("td", { text: e.workflow }), node("td", { text: e.listener || "" }),
    node("td", {}, runState(e)),
    node("td", {}, e.batch ? opener(String(e.batch.first_id), "event", e.batch.first_id) : "",
      e.batch ? `..${e.batch.last_id} retry ${e.batch.retry}` : ""),
    node("td", {}, clock(e.started_at)))));
  const rows = await Promise.all(schedules.map(async (s) => {
    let next = "paused";  // a paused schedule fires at no time
    if (s.enabled !== false) {
      try { next = ((await inSession("get_schedule", { alias: s.alias })).schedule.next_invocations || []).slice(0, 3).join(", "); } catch (err) { next = String(err.message || err); }
    }
    // A cron or a one-time wall clock means nothing without its zone (the next firings beside it are UTC).
    const zone = s.repeat.timezone ? ` (${s.repeat.timezone})` : "";
    const repeat = s.repeat.type === "interval" ? `every ${s.repeat.every_seconds} s` : `${s.repeat.cron_expression || s.repeat.invocation_time}${zone}`;
    return node("tr", {}, node("td", { text: s.alias }), node("td", { text: repeat }),
      node("td", { text: s.target.alias || s.target.workflow || "" }), node("td", { text: next }));
  }));
  show(el("schedules").tBodies[0], rows);
  el("schedules-panel").hidden = schedules.length === 0;
  if (objectsStale) await renderObjects(sid);
}

// The session's newest runs (`list_executions` answers 1000 at most), oldest first; past them, the running and
// failed ones too (asked for by status), so that an older run still running, or an outcome's failure, shows.
async function readRuns() {
  const { executions, more } = await inSession("list_executions", { newest_first: true });
  el("executions-more").textContent = "";
  const newest = executions.reverse();
  if (!more) return newest;
  const known = new Set(newest.map((e) => e.id));
  const also = await Promise.all(
    ["running", "failed"].map((status) => inSession("list_executions", { status, newest_first: true })));
  const earlier = also.flatMap((r) => r.executions).filter((e) => !known.has(e.id));
  earlier.sort((a, b) => (a.started_at < b.started_at ? -1 : 1));
  el("executions-more").textContent = `the session's newest ${newest.length} runs, and the running and failed ones before them`;
  return [...earlier, ...newest];
}

async function renderObjects(sid) {
  objectsStale = false;
  const prefix = el("object-prefix").value.trim();
  const { objects } = await inSession("list_objects", prefix ? { prefix } : {});
  if (sid !== state.current) return;
  show(el("objects").tBodies[0], objects.slice(0, OBJECTS_SHOWN).map((o) => node("tr", { "data-object": o.alias },
    node("td", {}, opener(o.alias, "object", o.alias)), node("td", { text: String(o.rev) }),
    node("td", { class: "muted", text: (JSON.stringify(o.value) || "").slice(0, 60) }), node("td", {}, clock(o.updated_at)))));
  el("objects-more").textContent = objects.length > OBJECTS_SHOWN ? `the first ${OBJECTS_SHOWN} of ${objects.length}; narrow with a prefix` : "";
}

function renderThreads() {
  show(el("threads"), [...threads].sort().map((alias) => node("li", { "data-thread": alias }, opener(alias, "thread", alias))));
}

// Thread aliases, from the newest events of the session: there is no command that lists threads, so the page
// learns them from `thread.item_posted` events (and the stream); any other opens by its alias.
async function learnThreads(sid, last) {
  const types = ["thread.item_posted"];
  const after = await newestFrom(sid, last, THREADS_LOOKBACK, types);
  const { events } = await inSession("list_session_events", { after, limit: 1000, types });
  if (sid !== state.current) return;
  for (const e of events) threads.add(e.alias);
  renderThreads();
}

async function learnEventTypes() {
  const { event_types: types } = await command({ command: "list_event_types" });
  const select = el("emit-form").type;
  show(select, types.map((t) => node("option", { value: t.name, text: t.name })));
  el("emit-none").hidden = types.length > 0;
}

// A refusal that says the address names no session: none by that id, or an id no session can have (a paste with
// more to it), which the platform refuses naming `session_id` before it looks.
function noSuchSession(err) {
  return err.code === "not_found" || (err.code === "invalid_request" && String(err.message).startsWith("invalid_request: session_id:"));
}

// `visit`: a session the user chose, a step Back returns from; the page's own choice replaces the address.
async function select(sid, visit = false) {
  if (signedOut) return;
  state.current = sid;
  el("session").hidden = false;
  el("session-title").textContent = `Session ${sid}`;
  for (const item of el("sessions").children) item.classList.toggle("selected", item.dataset.session === sid);
  if (new URLSearchParams(location.search).get("session") !== sid) {
    history[visit ? "pushState" : "replaceState"](null, "", `?session=${encodeURIComponent(sid)}`);
  }
  threads = new Set();
  objectsStale = true;
  renderThreads();
  el("timeline").replaceChildren();
  el("runs-timeline").replaceChildren();
  // A session that is not there at all says so.
  try {
    const known = await sessionOf(sid);
    if (sid !== state.current) return;
    if (known.alias) el("session-title").textContent = `Session ${known.alias} (${sid})`;
    const last = known.last_event_id || 0;
    restart(sid, await newestFrom(sid, last, RECENT_EVENTS));
    await Promise.all([refreshSession(), learnThreads(sid, last), learnEventTypes()]);
  } catch (err) {
    if (!noSuchSession(err) || sid !== state.current) throw err;
    missing.add(sid);
    stop();
    state.current = null;
    el("session").hidden = true;
    el("connection").textContent = `no session ${sid}: ${err.message}`;
  }
}

// What the page says while the platform holds no session it may show (none opened yet, or none the key reads):
// it is connected, and the first one opened shows without a reload.
const NO_SESSION = "no session yet: open one (open_session) and it shows here";

// The session the page opens on: the one asked for, else the newest open one, else the newest of all.
function firstSession() {
  const wanted = new URLSearchParams(location.search).get("session");
  if (wanted) return missing.has(wanted) ? null : wanted;
  const open = sessions.find((s) => s.status === "open");
  return (open || sessions[0] || {}).id || null;
}

async function tick() {
  if (signedOut) return;
  try {
    await refreshSessions();
    if (signedOut) return;
    if (!state.current) {
      const first = firstSession();
      if (first) await select(first);
      else if (!sessions.length && !missing.size) el("connection").textContent = NO_SESSION;
    } else {
      // Without a live stream (a key that may not listen) nothing says the objects changed: read them each time.
      if (!streaming()) objectsStale = true;
      await refreshSession();
    }
  } catch (err) {
    sayFailure(err);
  }
}

// What to say of a failure: a refusal in the platform's words, no answer at all as that (`Unreachable`: the
// next refresh tries again).
function said(err) {
  return String(err.message || err);
}

// A failure that comes back after the page signed out (a refresh in flight at the sign-out, refused) says nothing
// over its "signed out".
function sayFailure(err) {
  if (!signedOut && !(err instanceof Stale)) el("connection").textContent = said(err);
}

whenSignedOut(askToSignIn);
whenBatch((events) => {
  for (const e of events) {
    if (e.type === "thread.item_posted" && e.alias && !threads.has(e.alias)) {
      threads.add(e.alias);
      renderThreads();
    }
    if (e.type.startsWith("object.")) objectsStale = true;
  }
  refreshSession().catch(() => {});
});
hooks.changed = (name) => {
  if (name === "write_object") objectsStale = true;
  refreshSession().catch(() => {});
};
hooks.body = (name) => bodies[name] || null;
wire();

el("sessions").addEventListener("click", (e) => {
  const item = e.target instanceof Element ? e.target.closest("[data-session]") : null;
  if (item) select(item.dataset.session, true).catch(sayFailure);
});
// Back (or Forward) to a session chosen before: show it again.
window.addEventListener("popstate", () => {
  const sid = new URLSearchParams(location.search).get("session");
  if (sid && sid !== state.current && !signedOut) select(sid).catch(sayFailure);
});
el("object-prefix").addEventListener("change", () => {
  objectsStale = true;
  refreshSession().catch(() => {});
});
el("open-thread").addEventListener("submit", (e) => {
  e.preventDefault();
  const alias = e.target.alias.value.trim();
  if (alias && state.current) openThread(alias);
});

el("sign-in").addEventListener("submit", async (e) => {
  e.preventDefault();
  const key = el("key");
  state.signing += 1;
  try {
    const reply = await post("/dashboard/sign-in", { key: key.value });
    state.config.signed_in = reply.signed_in;
    state.config.csrf = reply.csrf;
  } catch (err) {
    el("connection").textContent = String(err.message || err);
    return;
  } finally {
    key.value = "";
  }
  signedOut = false;
  el("sign-in").hidden = true;
  showWho();
  el("connection").textContent = `signed in as ${state.config.signed_in}`;
  try {
    await refreshSessions();
    if (state.current) await select(state.current);
    else await tick();
  } catch (err) {
    sayFailure(err);
  }
});

el("sign-out").addEventListener("click", async () => {
  state.signing += 1;
  try { await post("/dashboard/sign-out", {}); } catch (err) { /* signed out either way */ }
  stop();
  state.config.signed_in = null;
  state.config.csrf = null;
  askToSignIn(SIGNED_OUT);
});

(async () => {
  await loadConfig();
  showWho();
  if (state.config.token_required && !state.config.signed_in) askToSignIn();
  setInterval(tick, REFRESH_MS);
  await tick();
})();
