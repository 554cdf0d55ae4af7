// The session's pace over the last hour: its events per second, and each lane's pending count.
// Events are read by id (`list_session_events`) as they come: each refresh reads only what is new since the
// last, a few pages at most, and keeps one count per second of the hour, never the events. Ids are drawn from one
// sequence for every session, so no count is inferred from them. When the page opens it reads back the session's
// newest events, about LOOKBACK_PAGES pages of them (a longer session's curve starts at the oldest read, and says
// so); a session writing faster than a refresh reads is skipped ahead to its end, and the part not read is drawn
// hatched.
// Pending is no record's: it is sampled from `list_session_listeners` at each refresh (at most once a second,
// the LANES_KEPT fullest lanes), so its curve starts when the page opened.

import { command } from "./api.js";
import { el, node, show } from "./dom.js";
import { newestFrom } from "./newest.js";
import { roundStep, scale, svg, timeAxis, timeOfDay, tooltip } from "./svg.js";

const HOUR = 3600e3;
const PAGE = 1000;
// 2 pages a refresh (every 2 s): the page keeps up with 1,000 of the session's events a second.
const PAGES_PER_REFRESH = 2;
const LOOKBACK_PAGES = 5;
const SAMPLE_MS = 1000;
const HOLD_MS = 10e3;
const LANES_KEPT = 20;
const LANES_DRAWN = 5;
// Each drawn lane's colour (`series-N`), kept while it stays drawn: a colour goes by the lane, not by its rank,
// so two lanes never swap colours between refreshes.
const seriesOf = new Map();

function colours(lanes) {
  const taken = new Set();
  for (const lane of lanes) {
    const kept = seriesOf.get(lane);
    if (kept !== undefined && !taken.has(kept)) taken.add(kept);
    else seriesOf.delete(lane);
  }
  for (const lane of lanes) {
    if (seriesOf.has(lane)) continue;
    let free = 0;
    while (taken.has(free)) free += 1;
    seriesOf.set(lane, free);
    taken.add(free);
  }
  return new Map(lanes.map((lane) => [lane, seriesOf.get(lane)]));
}
// A chart's span is at least this, so the first minute after the page opened is not stretched over the width.
const LEAST_SPAN = 120e3;
const HEIGHT = 120;
const PLOT_TOP = 14;
const AXIS = 24;

let r = fresh(null);

function fresh(sid) {
  // read: the last event id counted (null: not started); counts: per second; gaps: [from, to] not read.
  return { sid, read: null, whole: false, from: null, newest: 0, counts: new Map(), gaps: [], samples: [], opened: Date.now(), error: null };
}

function forSession(sid) {
  if (r.sid !== sid) r = fresh(sid);
  return r;
}

function now() {
  return Math.max(Date.now(), r.newest);
}

function count(e) {
  const t = Date.parse(e.created_at);
  const second = Math.floor(t / 1000) * 1000;
  r.counts.set(second, (r.counts.get(second) || 0) + 1);
  // The oldest second counted, as the counts are kept: its own count is inside the curve, not cut off before it.
  if (r.from === null) r.from = second;
  if (r.gaps.length && r.gaps[r.gaps.length - 1][1] === null) r.gaps[r.gaps.length - 1][1] = t;
  r.newest = Math.max(r.newest, t);
}

// Reads the session's events after the last one counted, up to `end` (the session's last event id, null when
// the page does not know it yet: then nothing is read).
export async function readEvents(sid, end) {
  const mine = forSession(sid);
  if (end === null || end === undefined) return;
  const opening = mine.read === null;
  try {
    // Opening: the newest page's start, and a start LOOKBACK_PAGES times as far back, at the same pace (ids are
    // not evenly spread, so the pages read from there may stop short of the newest page: then it is read as well).
    const newest = opening ? await newestFrom(sid, end, PAGE) : null;
    if (opening) mine.read = newest === 0 ? 0 : Math.max(0, end - LOOKBACK_PAGES * (end - newest));
    if (r !== mine) return;
    const from = mine.read;
    let behind = true;
    for (let page = 0; behind && page < (opening ? LOOKBACK_PAGES : PAGES_PER_REFRESH); page += 1) {
      behind = !(await readPage(sid, mine));
    }
    if (r !== mine) return;
    if (opening) {
      mine.whole = from === 0 && !behind;
      if (behind && mine.read < newest) {
        // The newest page, past where the pages read from there stopped: the part between is not read.
        mine.gaps.push([mine.newest, null]);
        mine.read = newest;
        behind = !(await readPage(sid, mine));
        if (r !== mine) return;
      }
    }
    if (behind && mine.read < end) {
      // More than a refresh reads: skip to the session's end, and say what was not read.
      mine.gaps.push([mine.newest, null]);
      mine.read = end;
    }
    mine.error = null;
  } catch (err) {
    // The rest of the page goes on; the chart says why it stopped, and the next refresh tries again.
    mine.error = String(err.message || err);
  }
  const since = now() - HOUR;
  for (const second of mine.counts.keys()) if (second < since) mine.counts.delete(second);
  mine.gaps = mine.gaps.filter(([, to]) => to === null || to >= since);
}

// One page after what was read, counted; whether it reached the session's end (a short page), or the page moved
// to another session meanwhile.
async function readPage(sid, mine) {
  const reply = await command({ command: "list_session_events", session_id: sid, after: mine.read, limit: PAGE });
  if (r !== mine) return true;
  for (const e of reply.events) count(e);
  mine.read = reply.last_id;
  return reply.events.length < PAGE;
}

// Keeps what `list_session_listeners` says each lane has pending now (the fullest LANES_KEPT, and the total).
export function samplePending(sid, listeners) {
  const mine = forSession(sid);
  const t = Date.now();
  const previous = mine.samples[mine.samples.length - 1];
  if (previous && t - previous.t < SAMPLE_MS) return;
  const lanes = listeners.flatMap((l) => l.lanes.map((lane) => [`${l.name} ${lane.lane}`, lane.pending]));
  const total = lanes.reduce((sum, [, pending]) => sum + pending, 0);
  const fullest = lanes.filter(([, p]) => p > 0).sort((a, b) => b[1] - a[1]).slice(0, LANES_KEPT);
  mine.samples.push({ t, total, lanes: new Map(fullest) });
  while (mine.samples[0].t < t - HOUR) mine.samples.shift();
}

// A round number at or above `most`, for the top of a chart: 1, 2, 5, 10, 20, 50...
function roundUp(most) {
  if (most <= 0) return 1;
  const power = 10 ** Math.floor(Math.log10(most));
  return [1, 2, 5, 10].map((m) => m * power).find((v) => v >= most);
}

// A chart's frame: its axis, its top's value, and the functions that place a time and a value.
function frame(from, to, top, unit, width) {
  const x0 = 44;
  const x1 = width - 8;
  const bottom = HEIGHT - AXIS;
  const x = scale(from, to, x0, x1);
  const y = (v) => bottom - ((bottom - PLOT_TOP) * v) / top;
  const parts = [
    timeAxis(from, to, x0, x1, bottom, bottom - PLOT_TOP),
    svg("line", { class: "grid", x1: x0, x2: x1, y1: PLOT_TOP, y2: PLOT_TOP }),
    svg("text", { class: "tick", x: x0 - 4, y: PLOT_TOP + 4, "text-anchor": "end", text: `${top}${unit}` }),
    svg("text", { class: "tick", x: x0 - 4, y: bottom + 4, "text-anchor": "end", text: "0" }),
  ];
  return { x, y, to, bottom, parts };
}

// A step line through [t, value] per bin (a null value breaks it); `closed` shades the area under it.
function stepPath(points, bin, f, closed) {
  let d = "";
  let open = null;
  const close = () => { if (open !== null && closed) d += `V${f.bottom}H${open}Z`; open = null; };
  for (const [t, v] of points) {
    if (v === null) { close(); continue; }
    const left = f.x(t);
    if (open === null) { d += `M${left} ${closed ? f.bottom : f.y(v)}`; open = left; }
    d += `V${f.y(v)}H${f.x(Math.min(t + bin, f.to))}`;
  }
  close();
  return d;
}

function bins(from, to, bin) {
  const list = [];
  for (let t = Math.floor(from / bin) * bin; t < to; t += bin) list.push(t);
  return list;
}

function span(start, end) {
  return [Math.min(Math.max(end - HOUR, start), end - LEAST_SPAN), end];
}

function drawEvents(width) {
  const end = now();
  const oldest = r.whole ? Math.min(end, ...r.counts.keys()) : r.from ?? end;
  const [from, to] = span(oldest, end);
  const bin = Math.max(1000, roundStep(to - from, (width - 52) / 4));
  const inGap = (t) => r.gaps.some(([a, b]) => t + bin > a && t < (b ?? end));
  const counted = new Map();
  for (const [second, n] of r.counts) if (second >= from) counted.set(Math.floor(second / bin) * bin, (counted.get(Math.floor(second / bin) * bin) || 0) + n);
  const points = bins(from, to, bin).map((t) => {
    if (inGap(t) || t + bin <= oldest) return [t, null];
    // The bin in progress is divided by the time it has had so far.
    return [t, (counted.get(t) || 0) / (Math.max(1000, Math.min(bin, end - t)) / 1000)];
  });
  const top = roundUp(Math.max(0, ...points.map(([, v]) => v ?? 0)));
  const f = frame(from, to, top, "/s", width);
  const total = [...counted.values()].reduce((a, b) => a + b, 0);
  const gaps = r.gaps.map(([a, b]) => svg("rect", { class: "not-read", x: f.x(Math.max(a, from)), y: PLOT_TOP, width: Math.max(1, f.x(b ?? end) - f.x(Math.max(a, from))), height: f.bottom - PLOT_TOP },
    tooltip("not read: the session wrote faster than the page reads")));
  const chart = svg("svg", { class: "chart rate", width, height: HEIGHT, "data-counted": total, "data-bin": bin / 1000 },
    ...f.parts, ...gaps, svg("path", { class: "area events", d: stepPath(points, bin, f, true) }));
  let start = "";
  if (r.read === null) start = ", from the session's next event (where it ends is not known yet)";
  else if (!r.whole) start = `: the session held more than the page reads back when it opened (${LOOKBACK_PAGES * PAGE} events)`;
  const trouble = r.error ? `; not read lately: ${r.error}` : "";
  return [chart, `events per second, ${bin / 1000} s bins${start}${r.gaps.length ? "; hatched: skipped, too many to read" : ""}${trouble}`];
}

function drawPending(width) {
  const end = Date.now();
  const [from, to] = span(r.opened, end);
  const bin = Math.max(SAMPLE_MS * 2, roundStep(to - from, (width - 52) / 4));
  // Per bin, the most pending that a sample in it saw. A bin no sample fell in (a slow refresh) keeps the last
  // value for HOLD_MS; past that (the page was away) the curve breaks.
  const most = (value) => {
    const per = new Map();
    for (const s of r.samples) {
      const b = Math.floor(s.t / bin) * bin;
      per.set(b, Math.max(per.get(b) ?? 0, value(s)));
    }
    let held = null;
    let heldAt = -Infinity;
    return bins(from, to, bin).map((t) => {
      if (per.has(t)) [held, heldAt] = [per.get(t), t];
      return [t, t - heldAt <= HOLD_MS ? held : null];
    });
  };
  const peaks = new Map();
  for (const s of r.samples) for (const [lane, p] of s.lanes) peaks.set(lane, Math.max(peaks.get(lane) || 0, p));
  const lanes = [...peaks.entries()].sort((a, b) => b[1] - a[1]).slice(0, LANES_DRAWN).map(([lane]) => lane);
  const colour = colours(lanes);
  const total = most((s) => s.total);
  const top = roundUp(Math.max(0, ...total.map(([, v]) => v ?? 0)));
  const f = frame(from, to, top, "", width);
  const chart = svg("svg", { class: "chart pending", width, height: HEIGHT, "data-samples": r.samples.length },
    ...f.parts, svg("path", { class: "area total", d: stepPath(total, bin, f, true) }, tooltip("all lanes")),
    ...lanes.map((lane) => svg("path", { class: `line series-${colour.get(lane)}`, "data-lane": lane, d: stepPath(most((s) => s.lanes.get(lane) || 0), bin, f, false) }, tooltip(lane))));
  const legend = node("span", { class: "legend" }, node("span", { class: "key total", text: "all lanes" }),
    ...lanes.map((lane) => node("span", { class: `key series-${colour.get(lane)}`, text: lane })));
  return [chart, `pending per lane, the most in each ${bin / 1000} s, sampled by this page since it opened at ${timeOfDay(r.opened)} (nothing records it before)`, legend];
}

const widthOf = (box) => Math.max(300, box.clientWidth || 450);

export function drawRates(sid) {
  forSession(sid);
  const [events, eventsNote] = drawEvents(widthOf(el("rates-events")));
  show(el("rates-events"), [events, node("p", { class: "muted", text: eventsNote })]);
  const [pending, pendingNote, legend] = drawPending(widthOf(el("rates-pending")));
  show(el("rates-pending"), [pending, node("p", { class: "muted" }, pendingNote, " ", legend)]);
}
