// The page's one way to the platform: POST /v1/commands, as every door. Where the API needs a key the page
// signs in with one (POST /dashboard/sign-in) and holds no secret itself: the browser keeps an HttpOnly cookie
// this script cannot read, and every POST carries the browser session's CSRF token (`X-CSRF-Token`), which
// the platform requires of any request a cookie authenticates that is not a GET.

// What the page knows of the platform and of who is signed in (`GET /dashboard/config`, the sign-in reply).
export const state = {
  config: { token_required: false, signed_in: null, csrf: null, temporal_ui: null, namespace: "default" },
  // The session on the page.
  current: null,
  // Moved on at each sign-in and sign-out: an answer to a request sent before is no answer for the page now.
  signing: 0,
};

// The client id the page's writes carry (`source.client`), so a listener may tell them apart.
export const CLIENT = "dashboard";

let onSignedOut = () => {};
export function whenSignedOut(handler) {
  onSignedOut = handler;
}

export async function loadConfig() {
  state.config = await (await fetch("/dashboard/config", { credentials: "same-origin" })).json();
  return state.config;
}

// A refused command, with the platform's code and message (`access_denied: ...`).
export class Refused extends Error {
  constructor(reply) {
    super(`${reply.error}: ${reply.message}`);
    this.code = reply.error;
  }
}

// An answer to a request sent before the last sign-in or sign-out: dropped, whatever it says (a refusal of the key
// signed out must not sign out the key signed in since, nor its sessions be listed for another key).
export class Stale extends Error {
  constructor() {
    super("asked before a sign-in or sign-out");
  }
}

// No answer at all: the platform is stopped, restarting or out of the network's reach.
export class Unreachable extends Error {
  constructor() {
    super("the platform does not answer; trying again…");
  }
}

// A POST of JSON with the browser session's CSRF token (the cookie goes with it by itself, same origin only).
export async function post(path, body) {
  const headers = { "content-type": "application/json" };
  if (state.config.csrf) headers["x-csrf-token"] = state.config.csrf;
  const signing = state.signing;
  let response;
  try {
    response = await fetch(path, { method: "POST", headers, body: JSON.stringify(body), credentials: "same-origin" });
  } catch (err) {
    throw new Unreachable();
  }
  const reply = await response.json();
  if (signing !== state.signing) throw new Stale();
  if (response.status === 401 || (response.status === 403 && reply.error === "unauthorized")) {
    state.config.signed_in = null;
    state.config.csrf = null;
    onSignedOut(reply.message);
  }
  if (reply.status !== "success") throw new Refused(reply);
  return reply;
}

export function command(body) {
  return post("/v1/commands", body);
}

// A command on the session on the page.
export function inSession(name, args = {}) {
  return command({ command: name, session_id: state.current, ...args });
}
