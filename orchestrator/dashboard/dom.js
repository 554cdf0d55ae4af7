// Building the page's nodes, and replacing them only when what they show has changed.
// No framework and no inline anything: the Content-Security-Policy forbids inline script and style
// attributes, so a position is set through the node's `style` object, never through markup.

export const el = (id) => document.getElementById(id);

// A node with attributes (`class`, `text`, `data-*`, ...) and children (nodes or strings).
export function node(tag, attrs = {}, ...children) {
  const n = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") n.className = v;
    else if (k === "text") n.textContent = v;
    else n.setAttribute(k, v === true ? "" : String(v));
  }
  for (const child of children) if (child !== null && child !== undefined) n.append(child);
  return n;
}

// Replaces a container's children only when what they show has changed: a refresh that brought nothing new
// leaves the nodes in place, so a link under the pointer, a selection, a hover or a click on its way survives.
export function show(container, children) {
  const fresh = children.map((child) => (typeof child === "string" ? child : child.outerHTML)).join("");
  if (container.innerHTML !== fresh) container.replaceChildren(...children);
}

// A JSON value, indented, for the detail view.
export function pre(value) {
  return node("pre", { class: "json", text: JSON.stringify(value, null, 2) });
}

// A time of day from a stored ISO time (UTC, as the platform records it); the whole time on hover.
export function clock(iso) {
  if (!iso) return node("span", { text: "" });
  return node("time", { datetime: iso, title: iso, text: iso.slice(11, 19) });
}

// A text of the platform's with each ISO time in it shown as a time of day, as `clock` shows one.
const ISO_TIME = /\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})?/g;
export function withClocks(text) {
  const parts = [];
  let from = 0;
  for (const found of text.matchAll(ISO_TIME)) {
    parts.push(text.slice(from, found.index), clock(found[0]));
    from = found.index + found[0].length;
  }
  parts.push(text.slice(from));
  return parts.filter((part) => part !== "");
}

// A short, one-line rendering of a JSON value.
export function brief(value, most = 80) {
  const text = typeof value === "string" ? value : JSON.stringify(value);
  return text === undefined ? "" : text.length > most ? `${text.slice(0, most - 1)}…` : text;
}

// A button that the page's one click handler acts on (`data-act` and its arguments), so a node that a refresh
// kept or replaced does the same thing: nothing is bound to a node that may go.
export function actButton(label, act, args = {}) {
  const attrs = { type: "button", class: `act act-${act}`, "data-act": act, text: label };
  for (const [k, v] of Object.entries(args)) attrs[`data-${k}`] = v;
  return node("button", attrs);
}

// A link that opens something in the detail view (`data-open` names what, `data-id` which).
export function opener(label, what, id, extra = {}) {
  const attrs = { href: "#", class: `open open-${what}`, "data-open": what, "data-id": id, text: label };
  for (const [k, v] of Object.entries(extra)) attrs[`data-${k}`] = v;
  return node("a", attrs);
}
