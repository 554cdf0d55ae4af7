// The session's runs on a time axis, as `list_executions` recorded them: a group of rows per listener, each run a
// bar from its start to its end (a running one to now), coloured by how it ended, hatched while it waits for
// events. A run's attempts (`exe:...:{first id}.{retry}`, one run key) share a row, the backoff before each
// repeat a dashed line between them. Runs are packed into as few rows as overlap needs, so a few hundred stay
// legible: a listener's rows are as many as it had runs at once (at most MOST_ROWS; past that they overlap).
// A bar's tooltip has its batch, retry, times and error; a click opens its batch's first event.

import { el, node, show } from "./dom.js";
import { runLabel } from "./listeners.js";
import { duration, scale, svg, timeAxis, timeOfDay, tooltip } from "./svg.js";

const GUTTER = 160;
const ROW = 12;
const ROW_GAP = 3;
const GROUP_GAP = 10;
const AXIS = 24;
const MOST_ROWS = 16;
// A bar is at least this wide, so a run of a few milliseconds is still seen; its label needs LABEL_WIDTH.
const MIN_BAR = 2;
const LABEL_WIDTH = 26;
const WINDOWS = { all: null, "1h": 3600e3, "15m": 900e3, "5m": 300e3 };

let last = null;

// A run's key and attempt, from its execution id (`exe:{session}:{listener}:{lane}:{first id}.{retry}`).
export function attemptOf(id) {
  const m = /^(.*)\.(\d+)$/.exec(id);
  return m ? { key: m[1], retry: Number(m[2]) } : { key: id, retry: 0 };
}

// The runs of one key, attempts in order: one interval on one row.
function chains(runs, now) {
  const byKey = new Map();
  for (const e of runs) {
    const { key, retry } = attemptOf(e.id);
    const start = Date.parse(e.started_at);
    const attempt = { e, retry, start, end: e.ended_at ? Date.parse(e.ended_at) : Math.max(now, start) };
    if (!byKey.has(key)) byKey.set(key, []);
    byKey.get(key).push(attempt);
  }
  return [...byKey.entries()].map(([key, attempts]) => {
    attempts.sort((a, b) => a.retry - b.retry || a.start - b.start);
    return { key, attempts, start: attempts[0].start, end: Math.max(...attempts.map((a) => a.end)) };
  });
}

// Each chain on the first row free at its start (first fit, by start); past MOST_ROWS, on the row that frees
// first, overlapping. Returns the rows used and how many chains overlap another.
function pack(list, x) {
  list.sort((a, b) => a.start - b.start);
  const ends = [];
  let crowded = 0;
  for (const chain of list) {
    let row = ends.findIndex((end) => end + MIN_BAR <= x(chain.start));
    if (row < 0 && ends.length < MOST_ROWS) row = ends.push(-Infinity) - 1;
    if (row < 0) {
      row = ends.indexOf(Math.min(...ends));
      crowded += 1;
    }
    chain.row = row;
    ends[row] = Math.max(x(chain.end), x(chain.start) + MIN_BAR);
  }
  return { rows: Math.max(1, ends.length), crowded };
}

function describe(a) {
  const e = a.e;
  const lines = [runLabel(e.id), `${e.workflow}${e.listener ? `, listener ${e.listener}, lane ${e.lane}` : ", started by hand"}`];
  if (e.batch) {
    const count = e.batch.count ?? (e.batch.event_ids || []).length;
    lines.push(`batch of ${count} event${count === 1 ? "" : "s"} (${e.batch.first_id}..${e.batch.last_id}), retry ${e.batch.retry}${e.batch.replay_of ? `, a replay of ${e.batch.replay_of}` : ""}`);
  }
  const took = duration(a.end - a.start);
  lines.push(`${e.status}${e.ended_at ? ` after ${took}` : ` for ${took}`}, started ${e.started_at}${e.ended_at ? `, ended ${e.ended_at}` : ""}`);
  if (e.error) lines.push(`error: ${e.error}`);
  if (e.waiting) {
    const on = e.waiting.conditions.map((c) => (c.types || []).join(",") + (c.aliases ? ` on ${c.aliases.join(",")}` : ""));
    lines.push(`waits (wait ${e.waiting.seq}) for ${on.join(" | ")} after event ${e.waiting.after}, until ${e.waiting.deadline}`);
  }
  return lines.join("\n");
}

function bar(a, x, y, x0, x1) {
  const e = a.e;
  const left = Math.max(x0, x(a.start));
  const width = Math.max(MIN_BAR, Math.min(x1, x(a.end)) - left);
  const count = e.batch ? e.batch.count ?? (e.batch.event_ids || []).length : null;
  const rect = svg("rect", {
    class: `run status-${e.status}${e.waiting ? " waiting" : ""}`, x: left, y, width, height: ROW, rx: 2,
    "data-execution": e.id, "data-status": e.status, "data-retry": a.retry,
    "data-waiting": e.waiting ? e.waiting.seq : null,
    "data-open": e.batch ? "event" : null, "data-id": e.batch ? e.batch.first_id : null,
  }, tooltip(describe(a)));
  const parts = [rect];
  // A label where it fits and says more than the common case: the batch's events past one, its retry.
  const label = [count > 1 ? String(count) : "", a.retry ? `↻${a.retry}` : ""].filter(Boolean).join(" ");
  if (label && width >= LABEL_WIDTH) parts.push(svg("text", { class: "run-label", x: left + 3, y: y + ROW - 2.5, text: label }));
  if (e.waiting) {
    const cx = left + width;
    parts.push(svg("path", { class: "wait-mark", d: `M${cx} ${y - 1}l4 ${ROW / 2 + 1}l-4 ${ROW / 2 + 1}l-4 ${-ROW / 2 - 1}z` }, tooltip(describe(a))));
  }
  return parts;
}

// The dashed line across the backoff before a repeat, from one attempt's end to the next one's start.
function backoff(prev, next, x, y) {
  const middle = y + ROW / 2;
  return svg("line", { class: "backoff", x1: x(prev.end), x2: x(next.start), y1: middle, y2: middle, "data-backoff": attemptOf(next.e.id).key },
    tooltip(`backoff of ${duration(next.start - prev.end)} before retry ${next.retry}`));
}

function group(name, list, x, top, x0, x1) {
  const { rows, crowded } = pack(list, x);
  const height = Math.max(2, rows) * (ROW + ROW_GAP);
  const runs = list.reduce((n, c) => n + c.attempts.length, 0);
  const parts = [
    svg("line", { class: "group-rule", x1: 0, x2: x1, y1: top - GROUP_GAP / 2, y2: top - GROUP_GAP / 2 }),
    svg("text", { class: "group-name", x: 4, y: top + 10, text: name || "started by hand" }),
    svg("text", { class: "group-count", x: 4, y: top + 23, text: `${runs} run${runs === 1 ? "" : "s"}${crowded ? `, ${crowded} overlapping` : ""}` }),
  ];
  for (const chain of list) {
    const y = top + chain.row * (ROW + ROW_GAP);
    chain.attempts.forEach((a, i) => {
      if (i > 0 && a.start > chain.attempts[i - 1].end) parts.push(backoff(chain.attempts[i - 1], a, x, y));
      parts.push(...bar(a, x, y, x0, x1));
    });
  }
  return { g: svg("g", { class: "runs-group", "data-listener": name }, ...parts), height };
}

// Draws `runs` (from `list_executions`), a group per listener in `order` (then any other, then those started by
// hand), over the window chosen on the page.
export function drawRuns(runs, order, note = "") {
  last = { runs, order, note };
  const box = el("runs-timeline");
  const width = Math.max(600, box.clientWidth || 900);
  const now = Math.max(Date.now(), ...runs.map((e) => Date.parse(e.ended_at || e.started_at)));
  // Past the session's first runs only the running and failed ones are read: a window of the latest minutes would
  // show those alone and read as if nothing else ran, so every run read is drawn.
  el("runs-window").disabled = Boolean(note);
  const windowMs = note ? 0 : WINDOWS[el("runs-window").value];
  let all = chains(runs, now);
  const to = windowMs || all.some((c) => c.attempts.some((a) => !a.e.ended_at)) ? now : Math.max(...all.map((c) => c.end));
  let from = windowMs ? now - windowMs : Math.min(...all.map((c) => c.start));
  if (windowMs) {
    // A run's attempts that ended before the window are left out; a run with none left is.
    all = all.map((c) => ({ ...c, attempts: c.attempts.filter((a) => a.end >= from) })).filter((c) => c.attempts.length);
    for (const c of all) c.start = c.attempts[0].start;
  }
  if (!all.length) {
    show(box, [node("p", { class: "muted", text: runs.length ? "no run in this window" : "no run yet" })]);
    el("runs-note").textContent = note;
    return;
  }
  if (!windowMs) from -= Math.max(1000, (to - from) * 0.01);
  const x0 = GUTTER;
  const x1 = width - 8;
  const x = scale(from, to, x0, x1);
  const names = [...new Set([...order, ...all.map((c) => c.attempts[0].e.listener || "")])];
  const groups = [];
  let top = GROUP_GAP;
  for (const name of names) {
    const list = all.filter((c) => (c.attempts[0].e.listener || "") === name);
    if (!list.length) continue;
    const drawn = group(name, list, x, top, x0, x1);
    groups.push(drawn.g);
    top += drawn.height + GROUP_GAP;
  }
  const height = top + AXIS;
  const chart = svg("svg", { class: "chart runs", width, height, viewBox: `0 0 ${width} ${height}`, "data-runs": runs.length },
    svg("defs", {}, svg("pattern", { id: "hatch", width: 5, height: 5, patternUnits: "userSpaceOnUse", patternTransform: "rotate(45)" },
      svg("rect", { class: "hatch-bg", width: 5, height: 5 }), svg("rect", { class: "hatch-line", width: 2, height: 5 }))),
    timeAxis(from, to, x0, x1, top, top - GROUP_GAP), ...groups);
  show(box, [chart]);
  const shown = all.reduce((n, c) => n + c.attempts.length, 0);
  el("runs-note").textContent = `${shown} run${shown === 1 ? "" : "s"} from ${timeOfDay(from)} to ${to === now ? "now" : timeOfDay(to)} (UTC)${note ? `; ${note}` : ""}`;
}

el("runs-window").addEventListener("change", () => { if (last) drawRuns(last.runs, last.order, last.note); });
