/**
 * `subscriptions/listen` over HTTP: each request is checked against its
 * caller on exactly the message that is then served (every URI one of the
 * caller's handles), bounded per user and in all (`ListenLimits`), and served
 * by an entry of the caller's own, so that an update reaches only the user
 * whose handle changed.
 *
 * @module
 */

import type { McpHandlerRequestOptions, McpHttpHandler } from "@modelcontextprotocol/server";
import type { HandleStore } from "./types.ts";
import { handleOfUri, ListenLimitError, type ListenLimits, LiveUpdates } from "./live.ts";
import type { Telemetry } from "./telemetry.ts";

/** A parsed JSON-RPC message, as far as this file reads one. */
export type JsonRpcMessage = { method?: unknown; id?: unknown; params?: unknown };

/**
 * Parses a request body exactly as the SDK's entry would (its `TextDecoder`
 * drops one leading byte order mark, then `JSON.parse`), or `undefined` when
 * it is not JSON: the entry then finds no message in it either.
 */
export function parseBody(text: string): { value: unknown } | undefined {
  try {
    return { value: JSON.parse(text.startsWith("\uFEFF") ? text.slice(1) : text) };
  } catch {
    return undefined;
  }
}

/** Whether a parsed message is a `subscriptions/listen` message (request or not). */
export function isListen(message: unknown): message is JsonRpcMessage {
  return isObject(message) && message.method === "subscriptions/listen";
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** The id to echo in an answer to `message`: its own when it is a string or number. */
function idOf(message: JsonRpcMessage): string | number | null {
  return typeof message.id === "string" || typeof message.id === "number" ? message.id : null;
}

/** A JSON-RPC error answer to a request, with HTTP status 200 as the SDK answers in-band refusals. */
function rpcAnswer(
  id: string | number | null,
  code: number,
  message: string,
  data?: Record<string, unknown>,
): Response {
  return Response.json({
    jsonrpc: "2.0",
    id,
    error: { code, message, ...(data === undefined ? {} : { data }) },
  });
}

/** What a non-string JSON value is, in a word, for a message: never the value itself. */
function kindOf(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "a list";
  return typeof value === "object" ? "an object" : `a ${typeof value}`;
}

/**
 * For a `subscriptions/listen` message: the handles it subscribes to, after
 * checking each is the caller's, or the refusal (naming the first entry that
 * is not a URI of one of the caller's handles). Untrusted entries are never
 * formatted whole: only strings, cut short, appear in a message.
 */
async function checkListen(
  store: HandleStore,
  user: string,
  message: JsonRpcMessage,
): Promise<string[] | Response> {
  const id = idOf(message);
  const filter = isObject(message.params) ? message.params.notifications : undefined;
  const uris = isObject(filter) ? filter.resourceSubscriptions : undefined;
  // No resource subscriptions: nothing of anyone's to check (the entry answers a bad filter).
  if (uris === undefined) return [];
  const hint = "Subscribe to mcpstate://state/{handle} URIs of your own handles (resources/list).";
  if (!Array.isArray(uris)) {
    return rpcAnswer(
      id,
      -32602,
      `Invalid params: notifications.resourceSubscriptions is ${
        kindOf(uris)
      }, not a list of URIs. ${hint}`,
    );
  }
  if (uris.length > MAX_LISTEN_URIS) {
    return rpcAnswer(
      id,
      -32602,
      `A subscription may name at most ${MAX_LISTEN_URIS} resources; open another for more.`,
    );
  }
  const handles: string[] = [];
  for (const [index, uri] of uris.entries()) {
    if (typeof uri !== "string") {
      return rpcAnswer(
        id,
        -32602,
        `Invalid params: notifications.resourceSubscriptions[${index}] is ${
          kindOf(uri)
        }, not a URI. ${hint}`,
        { index },
      );
    }
    const handle = handleOfUri(uri);
    let known = handle !== undefined;
    if (handle !== undefined) {
      try {
        await store.get(handle, { user });
      } catch {
        known = false;
      }
    }
    if (!known) {
      const shown = uri.slice(0, 300);
      return rpcAnswer(id, -32002, `Resource not found: ${shown}. ${hint}`, { uri: shown });
    }
    handles.push(handle!);
  }
  return handles;
}

/** Passes `res` through, aborting `ended` when its body ends or the client goes away. */
function untilClosed(res: Response, ended: AbortController): Response {
  if (!res.body) {
    ended.abort();
    return res;
  }
  const reader = res.body.getReader();
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        const { done, value } = await reader.read();
        if (done) {
          ended.abort();
          controller.close();
        } else {
          controller.enqueue(value);
        }
      } catch (e) {
        ended.abort();
        controller.error(e);
      }
    },
    cancel(reason) {
      ended.abort();
      return reader.cancel(reason);
    },
  });
  return new Response(body, res);
}

/** Resources one `subscriptions/listen` request may name (each is watched on the backend). */
const MAX_LISTEN_URIS = 100;

/** The limits of {@link ListenRouter}. */
export type ListenRouterLimits = ListenLimits & { maxStreamsPerUser: number };

/**
 * Routes each `subscriptions/listen` request to an entry of its own user's,
 * never to the shared one: an entry delivers an update to each of its
 * streams that names the URI, and handles (so URIs) are per user. Open
 * streams hear of changes made on any instance: each subscribed handle is
 * watched on the backend's change feed.
 */
export class ListenRouter {
  readonly #store: HandleStore;
  readonly #entry: (maxSubscriptions: number) => McpHttpHandler;
  readonly #perUserMax: number;
  readonly #listeners = new Map<string, { mcp: McpHttpHandler; streams: number }>();
  readonly #live: LiveUpdates;

  /**
   * @param store The open store.
   * @param entry Creates an entry serving at most that many subscriptions.
   * @param limits The streams and watches allowed, in all and per user.
   * @param telemetry Metrics of the live updates, if any.
   */
  constructor(
    store: HandleStore,
    entry: (maxSubscriptions: number) => McpHttpHandler,
    limits: ListenRouterLimits,
    telemetry: Telemetry | undefined,
  ) {
    this.#store = store;
    this.#entry = entry;
    this.#perUserMax = limits.maxStreamsPerUser;
    this.#live = new LiveUpdates(
      store,
      (uri, who) => this.#listeners.get(who)?.mcp.notify.resourceUpdated(uri),
      limits,
      telemetry,
    );
  }

  /**
   * Serves a `subscriptions/listen` request of `who` once it passed every check.
   *
   * @param request The HTTP request, its body already read.
   * @param message Its parsed message: what is checked is what is served.
   * @param who The caller's user; `undefined`: unauthenticated.
   * @param forward What the entry is handed (the parsed body, the token).
   * @returns The stream, or a JSON-RPC refusal.
   */
  async listen(
    request: Request,
    message: JsonRpcMessage,
    who: string | undefined,
    forward: McpHandlerRequestOptions,
  ): Promise<Response> {
    const id = idOf(message);
    if (who === undefined) {
      return rpcAnswer(id, -32001, "Unauthenticated: send a valid bearer token.");
    }
    const handles = await checkListen(this.#store, who, message);
    if (handles instanceof Response) return handles;
    const ended = new AbortController();
    request.signal.addEventListener("abort", () => ended.abort(), { once: true });
    const listeners = this.#listeners;
    let slot = listeners.get(who);
    if (!slot) listeners.set(who, slot = { mcp: this.#entry(this.#perUserMax), streams: 0 });
    const held = slot;
    held.streams++;
    ended.signal.addEventListener("abort", () => {
      if (--held.streams === 0 && listeners.get(who) === held) listeners.delete(who);
    }, { once: true });
    try {
      // The acknowledgement goes out only once every watch has its starting version.
      await this.#live.follow(who, handles, ended.signal);
    } catch (e) {
      ended.abort();
      if (!(e instanceof ListenLimitError)) throw e;
      return rpcAnswer(id, e.code, e.message, { limit: e.limit, max: e.max });
    }
    const res = await held.mcp.fetch(request, forward);
    return untilClosed(res, ended);
  }

  /**
   * Stops the watches and closes every user's entry.
   *
   * @returns When every entry is closed.
   */
  async close(): Promise<void> {
    this.#live.close();
    const entries = [...this.#listeners.values()].map((l) => l.mcp);
    this.#listeners.clear();
    await Promise.all(entries.map((e) => e.close()));
  }
}
