/** The platform's TypeScript client: `Client`, its errors, and the commands' generated types. */

export { Client, DEFAULT_TIMEOUT_MS, RECONNECT_MS, STREAM_IDLE_MS } from "./client";
export type { AnyReply, ClientOptions, StreamBatch, StreamOptions } from "./client";
export * from "./errors";
export * from "./generated";
export { SseParser } from "./sse";
export type { SseMessage } from "./sse";
