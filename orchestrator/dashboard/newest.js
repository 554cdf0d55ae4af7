// Where a session's newest events start, by id: what the stream, the threads and the pace chart read back from
// when a session opens. Event ids are drawn for all sessions from one sequence, so a span of ids holds fewer of
// this session's events the busier the others are: no count is inferred from ids, each is asked.

import { command } from "./api.js";

// The id after which the session's `wanted` newest events (of `types`, when given) lie, `wanted` at most a page of
// 1,000, or 0 when it holds fewer. The span back from `last` doubles until it holds as many, then the place where
// the newest `wanted` start is found between the last two spans by halving: a few small reads, however many
// events the session holds.
export async function newestFrom(sid, last, wanted, types) {
  const only = types ? { types } : {};
  const holds = async (after) =>
    (await command({ command: "list_session_events", session_id: sid, after, limit: wanted, ...only })).events.length >= wanted;
  let fewer = last;
  let after = Math.max(0, last - wanted);
  for (let span = wanted; !(await holds(after)); ) {
    if (after === 0) return 0;
    fewer = after;
    span *= 2;
    after = Math.max(0, last - span);
  }
  while (fewer - after > 1) {
    const middle = Math.floor((after + fewer) / 2);
    if (await holds(middle)) after = middle;
    else fewer = middle;
  }
  return after;
}
