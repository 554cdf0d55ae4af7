// A `simulate_listener` answer drawn as a timeline: a row per lane, a mark per batch at the time it would have
// fired (its colour the outcome it would have had), and below, each batch and what never matched and why.

import { brief, clock, el, node, opener } from "./dom.js";

function mark(batch, left) {
  const label = `${batch.first_id}${batch.last_id !== batch.first_id ? `..${batch.last_id}` : ""}`;
  const m = node("span", {
    class: `tl-mark status-${batch.status}`,
    title: `${batch.fires_at}: events ${batch.event_ids.join(", ")} (${batch.status}${batch.message ? `: ${batch.message}` : ""})`,
    text: label,
  });
  m.style.left = `${left}%`;
  return m;
}

export function drawSimulation(found) {
  const times = found.batches.map((b) => Date.parse(b.fires_at));
  const first = Math.min(...times);
  const span = Math.max(...times) - first || 1;
  const lanes = [...new Set(found.batches.map((b) => b.lane))];
  const rows = lanes.map((lane) => node("div", { class: "tl-row", "data-lane": lane },
    node("span", { class: "tl-lane", text: lane }),
    node("div", { class: "tl-track" }, ...found.batches.filter((b) => b.lane === lane)
      .map((b) => mark(b, (94 * (Date.parse(b.fires_at) - first)) / span)))));
  const axis = found.batches.length
    ? node("div", { class: "tl-axis muted" }, node("span", { text: new Date(first).toISOString().slice(11, 23) }),
      node("span", { text: `${((span === 1 ? 0 : span) / 1000).toFixed(1)} s later: ${new Date(first + (span === 1 ? 0 : span)).toISOString().slice(11, 23)}` }))
    : node("p", { class: "muted", text: "no batch: nothing in the stream matched" });
  const table = node("table", { class: "tl-batches" },
    node("tr", {}, ...["fires at", "lane", "events", "would be"].map((h) => node("th", { text: h }))),
    ...found.batches.slice(0, 200).map((b) => node("tr", {},
      node("td", {}, clock(b.fires_at)), node("td", { text: b.lane }),
      node("td", {}, ...b.event_ids.slice(0, 20).flatMap((id) => [opener(String(id), "event", id), " "]), b.event_ids.length > 20 ? "…" : ""),
      node("td", { class: `status-${b.status}`, text: `${b.status}${b.reason ? ` (${b.reason})` : ""}${b.message ? `: ${b.message}` : ""}` }))));
  const unmatched = Object.entries(found.unmatched).map(([why, n]) => `${n} by ${why}`).join(", ");
  const examples = (found.unmatched_events || []).slice(0, 5).map((u) => node("li", {},
    opener(`event ${u.event_id}`, "event", u.event_id), ` ${u.reason}: ${brief(u.message, 120)}`));
  el("timeline").replaceChildren(
    node("div", { class: "tl" }, ...rows), axis, table,
    node("p", { class: "muted", text: unmatched ? `not matched: ${unmatched}` : "every event read matched" }),
    examples.length ? node("ul", {}, ...examples) : "");
}
