// The session's live stream: the page is a connection listener (GET /v1/sessions/{id}/stream). It opens a
// little before the session's end, so the newest events show at once, then follows; each event opens whole.
// Where a key is needed, each opening takes a fresh single-use ticket (POST /v1/stream-tickets), never a key
// in a URL. The stream reconnects by itself (EventSource sends Last-Event-ID) after a network error or a
// stopping server's last message (`event: shutdown`); only a stream the browser gave up on (an HTTP error
// while the platform restarts) or a ticketed one is opened again here, after the last event shown.

import { post, Stale, state } from "./api.js";
import { el, node, opener } from "./dom.js";
import { runLabel } from "./listeners.js";

const STREAM_KEPT = 200;
const STREAM_RETRY_MS = 2000;

let stream = null;
// The last event id shown; null: none yet, from the session's end.
let seen = null;
// Numbers the openings: only the newest one may open a stream or try again.
let following = 0;
// Told of every batch that arrives (the page reads the session again).
let onBatch = () => {};

// The stream the page holds, for the browser tests and the console.
window.dashboard = { get stream() { return stream; } };

// The last event id the stream showed (null: none yet).
export function lastShown() {
  return seen;
}

export function whenBatch(handler) {
  onBatch = handler;
}

// Who did it (`actor`): a key, a listener (its run is the event's own business), a schedule.
export function who(actor) {
  const named = Object.entries(actor || {}).filter(([k]) => k !== "execution");
  return named.length ? `by ${named.map(([k, v]) => `${k} ${v}`).join(", ")}` : "";
}

function line(e) {
  const what = [e.type, e.alias || "", e.item ? `${e.item.type}/${e.item.role || ""}` : "",
    e.execution ? `${runLabel(e.execution.id)} ${e.execution.status}` : "", who(e.actor)].filter(Boolean).join("  ");
  return node("li", { "data-event": String(e.id) }, opener(String(e.id), "event", e.id), `  ${what}`);
}

// Whether a stream is open (or opening) for the session on the page.
export function streaming() {
  return stream !== null;
}

export function stop() {
  following += 1;
  if (stream) stream.close();
  stream = null;
}

// Follows the session from `after` (0: from the start; null: its end), or from what was shown already.
export async function follow(sid, after = seen) {
  const mine = ++following;
  if (stream) stream.close();
  stream = null;
  const again = () => setTimeout(() => { if (mine === following && state.current === sid) follow(sid); }, STREAM_RETRY_MS);
  const params = new URLSearchParams();
  if (after !== null) params.set("after", String(after));
  const ticketed = state.config.token_required;
  if (ticketed) {
    try {
      params.set("ticket", (await post("/v1/stream-tickets", { session_id: sid })).ticket);
    } catch (err) {
      // Asked before a sign-in or sign-out: the page follows again as the key signed in now, if any.
      if (err instanceof Stale) return;
      // A key that may not listen to this session: asking again would never change that; say so and stop.
      if (err.code === "access_denied") {
        el("connection").textContent = `no live stream: this key cannot listen to the session (${err.message})`;
        return;
      }
      // Signed out: signing in follows again. Otherwise the platform is away for now: try again.
      if (state.config.signed_in) {
        el("connection").textContent = "stream reconnecting…";
        again();
      }
      return;
    }
    if (mine !== following || state.current !== sid) return;
  }
  const opened = new EventSource(`/v1/sessions/${encodeURIComponent(sid)}/stream?${params}`);
  stream = opened;
  opened.addEventListener("batch", (message) => {
    const data = JSON.parse(message.data);
    seen = Math.max(seen ?? 0, data.last_id);
    const list = el("stream");
    for (const e of data.events) list.prepend(line(e));
    while (list.children.length > STREAM_KEPT) list.lastChild.remove();
    onBatch(data.events);
  });
  opened.addEventListener("shutdown", () => { el("connection").textContent = "platform stopping; reconnecting…"; });
  opened.onopen = () => { el("connection").textContent = "live"; };
  opened.onerror = () => {
    el("connection").textContent = "stream reconnecting…";
    if (ticketed) opened.close();
    if ((ticketed || opened.readyState === EventSource.CLOSED) && stream === opened) again();
  };
}

// A new session on the page: an empty list, and the stream from `after`.
export function restart(sid, after) {
  el("stream").replaceChildren();
  seen = after;
  return follow(sid, after);
}
