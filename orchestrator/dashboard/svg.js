// What the page's charts share: SVG nodes, a time scale, and a time axis with round ticks. Drawn by hand, no
// chart library: a few rectangles, paths and lines are all the charts need. Colours and fonts are classes in
// dashboard.css (the Content-Security-Policy forbids inline styles; geometry is attributes, which it allows).

const NS = "http://www.w3.org/2000/svg";

// An SVG node with attributes (`class`, `text`, others as given) and children; a `title` child is a tooltip.
export function svg(tag, attrs = {}, ...children) {
  const n = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "text") n.textContent = v;
    else n.setAttribute(k, String(v));
  }
  for (const child of children) if (child !== null && child !== undefined && child !== "") n.append(child);
  return n;
}

export const tooltip = (text) => svg("title", { text });

// Maps a time (ms) in [from, to] onto [x0, x1] pixels.
export function scale(from, to, x0, x1) {
  const span = Math.max(1, to - from);
  return (t) => x0 + ((t - from) * (x1 - x0)) / span;
}

// Round steps for ticks and bins: seconds, minutes, hours.
const STEPS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400]
  .map((s) => s * 1000);

// The smallest round step that cuts `span` ms into at most `most` parts.
export function roundStep(span, most) {
  return STEPS.find((s) => span / s <= most) || Math.ceil(span / most / 86400e3) * 86400e3;
}

// A time of day in UTC, as the rest of the page shows times; seconds only when the step needs them.
export function timeOfDay(t, step = 1000) {
  const iso = new Date(t).toISOString();
  return step < 60e3 ? iso.slice(11, 19) : iso.slice(11, 16);
}

// A time axis along y: a line, and a tick with its time at each round step in [from, to].
export function timeAxis(from, to, x0, x1, y, height = 0) {
  const x = scale(from, to, x0, x1);
  const step = roundStep(to - from, Math.max(2, Math.floor((x1 - x0) / 90)));
  const ticks = [];
  for (let t = Math.ceil(from / step) * step; t <= to; t += step) {
    ticks.push(svg("line", { class: "grid", x1: x(t), x2: x(t), y1: y - height, y2: y + 4 }));
    // A time too near the end to be written whole is left unwritten.
    if (x(t) + 26 <= x1 + 8) ticks.push(svg("text", { class: "tick", x: x(t), y: y + 15, "text-anchor": "middle", text: timeOfDay(t, step) }));
  }
  return svg("g", { class: "axis" }, svg("line", { x1: x0, x2: x1, y1: y, y2: y }), ...ticks);
}

// A duration in words: `850 ms`, `12.5 s`, `3 min 20 s`.
export function duration(ms) {
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60e3) return `${(ms / 1000).toFixed(1)} s`;
  const s = Math.round(ms / 1000);
  return `${Math.floor(s / 60)} min ${s % 60} s`;
}
