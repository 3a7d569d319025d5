/**
 * Helpers for the tenant-isolation tests and the gauntlet's abuse of them:
 * raw `subscriptions/listen` streams over real HTTP (opened and closed with a
 * plain `AbortController`, so a closed stream's connection is really gone),
 * tokens with odd `sub` claims, and records two users hold under one name.
 *
 * @module
 */

import { openBackend } from "../src/url.ts";

/** The per-request envelope of a 2026-07-28 request. */
export const MODERN_META: Record<string, unknown> = {
  "io.modelcontextprotocol/protocolVersion": "2026-07-28",
  "io.modelcontextprotocol/clientCapabilities": {},
};

/**
 * A `subscriptions/listen` request body, as the official client sends it.
 *
 * @param uris The resource URIs (anything, for abuse).
 * @param id The JSON-RPC id.
 */
export function listenBody(uris: unknown[], id: string | number = "listen:1"): string {
  return JSON.stringify({
    jsonrpc: "2.0",
    id,
    method: "subscriptions/listen",
    params: { _meta: MODERN_META, notifications: { resourceSubscriptions: uris } },
  });
}

/**
 * The headers of a 2026-07-28 POST of `method` with a bearer token.
 *
 * @param token The bearer token.
 * @param method The JSON-RPC method (its `Mcp-Method` header), or `undefined` for none.
 */
export function mcpHeaders(token: string, method?: string): Record<string, string> {
  return {
    "content-type": "application/json",
    accept: "application/json, text/event-stream",
    authorization: `Bearer ${token}`,
    ...(method === undefined ? {} : { "mcp-protocol-version": "2026-07-28", "mcp-method": method }),
  };
}

/** A POST whose answer may be an event stream that stays open: see {@link post}. */
export interface Posted {
  /** The HTTP status, or `null` when the request failed. */
  status: number | null;
  /** A JSON answer's text, or an event stream's first event. */
  text: string;
  /** A JSON-RPC error in the answer, if any. */
  error: { code?: unknown; message?: unknown; data?: unknown } | undefined;
  /** Whether the answer is an event stream whose first event acknowledged a subscription. */
  acknowledged: boolean;
  /** Resolves `true` when an update of `uri` arrives on the stream within `ms`. */
  updated(uri: string, ms: number): Promise<boolean>;
  /** Closes the connection. */
  close(): void;
}

/**
 * POSTs `body` and reads the answer: all of a JSON answer, or the first event
 * of an event stream (at most `waitMs` for it), which then stays open until
 * {@link Posted.close}.
 *
 * @param url The `/mcp` URL.
 * @param headers The request headers.
 * @param body The body, sent as is.
 * @param waitMs How long to wait for an event stream's first event.
 */
export async function post(
  url: URL,
  headers: Record<string, string>,
  body: string,
  waitMs = 10_000,
): Promise<Posted> {
  const ac = new AbortController();
  const close = () => ac.abort();
  const none = () => Promise.resolve(false);
  let res: Response;
  try {
    res = await fetch(url, { method: "POST", headers, body, signal: ac.signal });
  } catch (e) {
    const text = e instanceof Error ? e.message : String(e);
    return { status: null, text, error: undefined, acknowledged: false, updated: none, close };
  }
  if (!res.headers.get("content-type")?.startsWith("text/event-stream")) {
    const text = await res.text().catch(() => "");
    return {
      status: res.status,
      text,
      error: errorOf(text),
      acknowledged: false,
      updated: none,
      close,
    };
  }
  const events = new EventReader(res.body!, ac.signal);
  const first = await events.next(waitMs);
  const text = first ?? "";
  return {
    status: res.status,
    text,
    error: errorOf(text.replace(/^[^{]*/, "")),
    acknowledged: text.includes("notifications/subscriptions/acknowledged"),
    updated: async (uri, ms) => {
      const deadline = Date.now() + ms;
      for (;;) {
        const event = await events.next(deadline - Date.now());
        if (event === undefined) return false;
        if (
          event.includes("notifications/resources/updated") && event.includes(JSON.stringify(uri))
        ) {
          return true;
        }
      }
    },
    close,
  };
}

function errorOf(text: string): Posted["error"] {
  try {
    const error = JSON.parse(text).error;
    return typeof error === "object" && error !== null ? error : undefined;
  } catch {
    return undefined;
  }
}

/** Reads server-sent events (`data:` of `message` events) one at a time. */
class EventReader {
  #reader: ReadableStreamDefaultReader<string>;
  #buffer = "";
  #pending: Promise<{ done: boolean; value?: string | undefined }> | undefined;
  #done = false;

  constructor(body: ReadableStream<Uint8Array>, signal: AbortSignal) {
    this.#reader = body.pipeThrough(new TextDecoderStream()).getReader();
    signal.addEventListener("abort", () => this.#reader.cancel().catch(() => {}), { once: true });
  }

  /** The next event's data, or `undefined` when none arrives within `ms` or the stream ended. */
  async next(ms: number): Promise<string | undefined> {
    for (;;) {
      const end = this.#buffer.indexOf("\n\n");
      if (end >= 0) {
        const event = this.#buffer.slice(0, end);
        this.#buffer = this.#buffer.slice(end + 2);
        const data = event.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5));
        if (data.length > 0) return data.join("\n").trim();
        continue;
      }
      if (this.#done || ms <= 0) return undefined;
      this.#pending ??= this.#reader.read().catch(() => ({ done: true }));
      let timer: ReturnType<typeof setTimeout> | undefined;
      const late = new Promise<"late">((r) => timer = setTimeout(() => r("late"), ms));
      const got = await Promise.race([this.#pending, late]);
      clearTimeout(timer);
      if (got === "late") return undefined;
      this.#pending = undefined;
      if (got.done) this.#done = true;
      else this.#buffer += got.value ?? "";
    }
  }
}

/**
 * `sub` claims that are not a non-empty string of at most 1,024 characters
 * (no U+0000, no unpaired surrogates), each with a name; several are built
 * around `real`, a subject that exists.
 *
 * @param real A real user's subject.
 */
export function oddSubjects(real: string): [string, unknown][] {
  return [
    [`[${JSON.stringify(real)}]: a list holding a real subject`, [real]],
    ["123: a number", 123],
    ['"": empty', ""],
    ["an object", { sub: real }],
    ["an object whose toString is not a function", { toString: 1 }],
    ["null", null],
    ["true", true],
    ["1,025 characters", real.slice(0, 1).repeat(1025)],
    ["with U+0000", `${real}\u0000`],
    ["with an unpaired surrogate", `${real}\ud800`],
  ];
}

/**
 * Gives each of `users` a record named `handle` (state `{n: 0}`), straight
 * through the backend: handles are per user, so two users may hold one name
 * (an import, a name a client chose).
 *
 * @param backendUrl The backend the server under test uses.
 * @param users The full user ids (`"<iss>#<sub>"`).
 * @param handle The handle, `kind_…`.
 */
export async function sameHandleFor(
  backendUrl: string,
  users: string[],
  handle: string,
): Promise<void> {
  const backend = await openBackend(backendUrl);
  const now = Date.now();
  try {
    for (const user of users) {
      const record = {
        handle,
        kind: handle.slice(0, handle.indexOf("_")),
        state: JSON.stringify({ n: 0 }),
        version: 1,
        createdAt: now,
        updatedAt: now,
        expiresAt: null,
        lastWriter: null,
      };
      const r = await backend.insert(user, record, { now, graceMs: 0 });
      if (!("inserted" in r) || !r.inserted) throw new Error(`${user} already has ${handle}`);
    }
  } finally {
    await backend.close();
  }
}
