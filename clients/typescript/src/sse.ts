/**
 * Server-Sent Events read off a byte stream, as the HTML standard parses them: lines end in CRLF, LF or CR; a
 * line starting with `:` is a comment (the platform's heartbeats); `data:` lines join with newlines; a blank line
 * ends a message. An `id:` takes effect when its message ends (the standard's "last event ID buffer"): a
 * connection broken partway through a message leaves `lastEventId` at the last whole one, so a reconnect never
 * resumes after a message that was not delivered. A message with an id and no data sets it and dispatches nothing.
 */

export interface SseMessage {
  /** The `event:` field (`message` when none was given). */
  event: string;
  data: string;
  /** The last event id after this message (its own `id:`, else the one before). */
  lastEventId: string;
  /** The `retry:` field, when the server asked for a reconnection delay. */
  retry?: number;
}

/** Parses chunks of text into messages; `feed` answers the messages the chunk completed. */
export class SseParser {
  private buffer = "";
  private data: string[] = [];
  private event = "";
  private retry: number | undefined;
  private sawCR = false;
  // The `id:` of the message being read, which becomes `lastEventId` at its blank line.
  private pendingId: string;
  /** The last event id as of the last message ended: where a reconnect resumes (`Last-Event-ID`). */
  lastEventId: string;

  constructor(lastEventId = "") {
    this.lastEventId = lastEventId;
    this.pendingId = lastEventId;
  }

  feed(chunk: string): SseMessage[] {
    const messages: SseMessage[] = [];
    let text = chunk;
    if (this.sawCR && text.startsWith("\n")) {
      text = text.slice(1); // the LF of a CRLF split across chunks
    }
    this.sawCR = false;
    this.buffer += text;
    let start = 0;
    for (let i = 0; i < this.buffer.length; i++) {
      const c = this.buffer[i];
      if (c !== "\n" && c !== "\r") continue;
      const line = this.buffer.slice(start, i);
      if (c === "\r") {
        if (i + 1 < this.buffer.length) {
          if (this.buffer[i + 1] === "\n") i++;
        } else {
          this.sawCR = true;
        }
      }
      start = i + 1;
      const message = this.line(line);
      if (message !== undefined) messages.push(message);
    }
    this.buffer = this.buffer.slice(start);
    return messages;
  }

  private line(line: string): SseMessage | undefined {
    if (line === "") {
      this.lastEventId = this.pendingId;
      const data = this.data;
      const event = this.event || "message";
      const retry = this.retry;
      this.data = [];
      this.event = "";
      this.retry = undefined;
      if (data.length === 0) return undefined;
      return { event, data: data.join("\n"), lastEventId: this.lastEventId, retry };
    }
    if (line.startsWith(":")) return undefined;
    const colon = line.indexOf(":");
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "data") this.data.push(value);
    else if (field === "event") this.event = value;
    else if (field === "id" && !value.includes("\0")) this.pendingId = value;
    else if (field === "retry" && /^\d+$/.test(value)) this.retry = Number(value);
    return undefined;
  }
}
