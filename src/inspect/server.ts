/**
 * The web inspector behind `mcpstate inspect`: a page on a loopback port
 * that shows one user's handles, a state as a tree, the history of a handle
 * as a timeline of diffs, and the trash — over a {@link HandleStore}, never
 * the MCP server.
 *
 * Everything it serves is in this package: the page, its style sheet and its
 * one script module are strings in `src/inspect/`, so `deno publish` and
 * `deno compile` carry them and nothing is fetched at run time. The page
 * asks a small JSON API on the same origin and hears of writes through
 * Server-Sent Events: a handle's changes through {@link HandleStore.watch}
 * (the backend's change feed), the list's through a poll of its first page
 * every second.
 *
 * Access: see `_guard.ts` — a one-time token in the printed URL, exchanged
 * for a session cookie; foreign `Host` and `Origin` are 403, anything
 * without the token or the cookie 401 with a page that shows no state and
 * says to run `mcpstate inspect` again. Read-only unless
 * `write` is set; its two writes, restoring a handle from the trash and
 * saving an earlier version's state as a new version, go through the store
 * with its rules (a save names the version the page showed, so a write in
 * between is refused as stale, never overwritten).
 *
 * @example Serve an inspector on a free port
 * ```ts ignore
 * import { HandleStore } from "@mcpstate/core";
 * import { serveInspector } from "./server.ts";
 * await using store = await HandleStore.fromUrl("sqlite:///~/.mcpstate/state.db");
 * const inspector = serveInspector(store, { user: "local", writer: "inspect/laptop" });
 * console.log(inspector.url); // http://127.0.0.1:PORT/?token=…
 * await inspector.finished;
 * ```
 *
 * @module
 */

import { InvalidArgument, McpStateError, StaleWrite } from "../errors.ts";
import type { HandleStore } from "../store.ts";
import type { HandleInfo } from "../types.ts";
import { toPayload } from "../wire.ts";
import { VERSION } from "../version.ts";
import { CLIENT_JS } from "./_client.ts";
import { Guard, refusedPage } from "./_guard.ts";
import { timeline } from "./_history.ts";
import { PAGE_CSS, pageHtml } from "./_page.ts";

/** Handles per page of the list and the trash. */
const PAGE = 25;
/** The byte budget of one read of a state or of one of its parts. */
const DEFAULT_BUDGET = 16_384;
/** How often the list's stream re-reads the first page for changes, in ms. */
const LIST_POLL_MS = 1_000;
/** States read at once to tell the sizes of a page. */
const SIZE_READS = 8;

/** Options of {@link createInspector}. */
export interface InspectorOptions {
  /** Whose handles it shows. */
  user: string;
  /** Allow restoring from the trash and restoring earlier versions. Default `false`: read-only. */
  write?: boolean;
  /** The writer label of its writes (`inspect/<hostname>`). */
  writer: string;
  /** A name for the backend, shown in the header (no credentials). */
  backendLabel?: string;
  /** Bytes read at once from a state; larger parts are loaded when opened. Default 16,384. */
  budgetBytes?: number;
}

/** Options of {@link serveInspector}. */
export interface ServeInspectorOptions extends InspectorOptions {
  /** The interface to listen on. Default `127.0.0.1`. */
  hostname?: string;
  /** The port; 0 (default) takes a free one. */
  port?: number;
}

/** A running inspector. */
export interface InspectorServing {
  /** The URL to open, with its one-time token. */
  url: string;
  /** Resolves when the listener has stopped. */
  finished: Promise<void>;
  /** Stops listening and ends open event streams; the store stays open. */
  close(): Promise<void>;
}

/** The inspector as a fetch handler. */
export interface Inspector {
  /** The one-time token the URL carries. */
  token: string;
  /** Serves one request. */
  fetch(request: Request): Promise<Response>;
  /** Ends open event streams. */
  close(): void;
}

/**
 * Creates the inspector's fetch handler for a listener at `hostname:port`.
 *
 * @param store The open store; the caller closes it.
 * @param hostname The host it listens on (allowed in `Host` and `Origin`).
 * @param port The port it listens on (part of the allowed `Origin`).
 * @param options The user, write access, writer label.
 * @returns The handler and its token.
 */
export function createInspector(
  store: HandleStore,
  hostname: string,
  port: number,
  options: InspectorOptions,
): Inspector {
  const guard = new Guard(hostname, port);
  const streams = new Set<AbortController>();
  const api = new Api(store, options, streams);
  return {
    token: guard.token,
    fetch: async (request: Request): Promise<Response> => {
      const verdict = guard.check(request);
      if (verdict.ok === false && verdict.status === 403) {
        return secured(new Response(`Forbidden: foreign ${verdict.reason}.\n`, { status: 403 }));
      }
      if (verdict.ok === false) {
        return secured(
          new Response(refusedPage(verdict.reason), {
            status: 401,
            headers: { "content-type": "text/html; charset=utf-8" },
          }),
        );
      }
      if (verdict.ok === "exchange") {
        // The token leaves the address bar and the history.
        return secured(
          new Response(null, {
            status: 303,
            headers: { location: "/", "set-cookie": verdict.cookie },
          }),
        );
      }
      return secured(await api.serve(request));
    },
    close: () => {
      for (const s of streams) s.abort();
      streams.clear();
    },
  };
}

/**
 * Serves the inspector on a loopback port (a free one by default).
 *
 * @param store The open store; the caller closes it after {@link InspectorServing.close}.
 * @param options Where to listen, the user, write access, writer label.
 * @returns The URL with its token, and how to stop.
 */
export function serveInspector(
  store: HandleStore,
  options: ServeInspectorOptions,
): InspectorServing {
  const hostname = options.hostname ?? "127.0.0.1";
  // The handler needs the port, which is known once the listener is up.
  const ready = Promise.withResolvers<Inspector>();
  const server = Deno.serve(
    { hostname, port: options.port ?? 0, onListen: () => {} },
    async (request) => (await ready.promise).fetch(request),
  );
  const { port } = server.addr as Deno.NetAddr;
  const inspector = createInspector(store, hostname, port, options);
  ready.resolve(inspector);
  const host = hostname.includes(":") ? `[${hostname}]` : hostname;
  let closing: Promise<void> | undefined;
  return {
    url: `http://${host}:${port}/?token=${inspector.token}`,
    finished: server.finished,
    close: () =>
      closing ??= (async () => {
        inspector.close();
        await server.shutdown();
      })(),
  };
}

/** Adds the headers every answer carries: no caching, no framing, no referrer, a strict CSP. */
function secured(res: Response): Response {
  const h = res.headers;
  h.set("cache-control", "no-store");
  h.set("x-content-type-options", "nosniff");
  h.set("x-frame-options", "DENY");
  h.set("referrer-policy", "no-referrer");
  h.set(
    "content-security-policy",
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; " +
      "img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  );
  return res;
}

/** A JSON answer. */
function json(value: unknown, status = 200): Response {
  return new Response(JSON.stringify(value), {
    status,
    headers: { "content-type": "application/json; charset=utf-8" },
  });
}

/** The HTTP status of a store error. */
function statusOf(e: McpStateError): number {
  switch (e.code) {
    case "handle_not_found":
    case "handle_expired":
      return 404;
    case "invalid_argument":
      return 400;
    case "stale_write":
      return 409;
    default:
      return 500;
  }
}

/** The routes behind the guard. */
class Api {
  readonly #store: HandleStore;
  readonly #options: InspectorOptions;
  readonly #streams: Set<AbortController>;
  readonly #budget: number;

  constructor(store: HandleStore, options: InspectorOptions, streams: Set<AbortController>) {
    this.#store = store;
    this.#options = options;
    this.#streams = streams;
    this.#budget = options.budgetBytes ?? DEFAULT_BUDGET;
  }

  async serve(request: Request): Promise<Response> {
    const url = new URL(request.url);
    const q = url.searchParams;
    const get = request.method === "GET" || request.method === "HEAD";
    try {
      switch (url.pathname) {
        case "/":
          if (!get) break;
          return new Response(pageHtml(), {
            headers: { "content-type": "text/html; charset=utf-8" },
          });
        case "/app.js":
          if (!get) break;
          return new Response(CLIENT_JS, {
            headers: { "content-type": "text/javascript; charset=utf-8" },
          });
        case "/app.css":
          if (!get) break;
          return new Response(PAGE_CSS, { headers: { "content-type": "text/css; charset=utf-8" } });
        case "/favicon.ico":
          return new Response(null, { status: 204 });
        case "/api/info":
          return json({
            user: this.#options.user,
            write: this.#options.write ?? false,
            writer: this.#options.writer,
            backend: this.#options.backendLabel ?? null,
            version: VERSION,
          });
        case "/api/handles":
          return json(await this.#handles(q.get("kind") || undefined, q.get("cursor")));
        case "/api/state":
          return json(await this.#state(need(q, "handle"), q.get("path")));
        case "/api/history":
          return json(await timeline(this.#store, need(q, "handle"), this.#options.user));
        case "/api/trash":
          return json(await this.#trash(q.get("cursor")));
        case "/api/restore":
          if (request.method !== "POST") break;
          return this.#readOnly() ?? await this.#restore(request);
        case "/api/restore-version":
          if (request.method !== "POST") break;
          return this.#readOnly() ?? await this.#restoreVersion(request);
        case "/api/events":
          return this.#events(request, q.get("handle"));
      }
      return new Response("Not found.\n", { status: 404 });
    } catch (e) {
      if (e instanceof McpStateError) return json({ error: e.toPayload() }, statusOf(e));
      const message = e instanceof Error ? e.message : String(e);
      return json({ error: { code: "internal_error", message } }, 500);
    }
  }

  async #handles(kind: string | undefined, cursor: string | null) {
    const user = this.#options.user;
    const page = await this.#store.listPage(user, {
      limit: PAGE,
      ...(kind === undefined ? {} : { kind }),
      ...(cursor ? { cursor } : {}),
    });
    // The listing is metadata only: a size is read from each state.
    const sizes = new Map<string, number | null>();
    const queue = [...page.handles];
    await Promise.all(Array.from({ length: SIZE_READS }, async () => {
      for (let h = queue.shift(); h; h = queue.shift()) {
        const r = await this.#store.read(h.handle, { user, maxBytes: 256 }).catch(() => null);
        sizes.set(h.handle, r?.sizeBytes ?? null);
      }
    }));
    return {
      handles: page.handles.map((h) => ({
        ...toPayload(h),
        size_bytes: sizes.get(h.handle) ?? null,
        expired: this.#store.isExpired(h),
      })),
      next_cursor: page.nextCursor,
    };
  }

  async #state(handle: string, path: string | null) {
    const user = this.#options.user;
    const budget = this.#budget;
    if (path === null || path === "") {
      const r = await this.#store.read(handle, { user, maxBytes: budget });
      const { handle: _, ...info } = toPayload(r as HandleInfo);
      return {
        handle,
        info,
        size_bytes: r.sizeBytes,
        node: r.truncated ? r.outline : { value: r.state },
      };
    }
    const r = await this.#store.read(handle, { user, maxBytes: budget, paths: [path] });
    if (r.missing?.includes(path)) {
      throw new InvalidArgument(`The state has nothing at ${path}.`, { field: "path", path });
    }
    const outlined = r.outline?.[path];
    return {
      handle,
      version: r.version,
      path,
      node: outlined ?? { value: r.values[path] },
    };
  }

  async #trash(cursor: string | null) {
    const page = await this.#store.trash(this.#options.user, {
      limit: PAGE,
      ...(cursor ? { cursor } : {}),
    });
    return {
      handles: page.handles.map((h) => ({
        ...toPayload(h),
        restorable_until: h.restorableUntil.toISOString(),
      })),
      next_cursor: page.nextCursor,
    };
  }

  /** The refusal of every write when the inspector is read-only; `undefined` with `--write`. */
  #readOnly(): Response | undefined {
    if (this.#options.write) return undefined;
    return json({
      error: {
        code: "read_only",
        message: "This inspector is read-only. Start it with --write to restore handles.",
      },
    }, 403);
  }

  async #restore(request: Request): Promise<Response> {
    const body = await request.json().catch(() => null) as { handle?: unknown } | null;
    if (typeof body?.handle !== "string") {
      return json({ error: { code: "invalid_argument", message: 'Send {"handle": …}.' } }, 400);
    }
    const snap = await this.#store.restore(body.handle, { user: this.#options.user });
    const { state: _, ...info } = toPayload(snap);
    return json({ ok: true, restored: info });
  }

  /**
   * Saves the state of an earlier version as a new version, based on the
   * version the page showed (`expect_version`): a write since then makes it
   * a `stale_write` (409) and changes nothing.
   */
  async #restoreVersion(request: Request): Promise<Response> {
    const body = await request.json().catch(() => null) as Record<string, unknown> | null;
    const { handle, version, expect_version: expect } = body ?? {};
    if (typeof handle !== "string" || !isVersion(version) || !isVersion(expect)) {
      throw new InvalidArgument(
        'Send {"handle": …, "version": N, "expect_version": M}: the version to restore and the current version the page shows.',
        { field: "body" },
      );
    }
    if (version >= expect) {
      throw new InvalidArgument(
        `Version ${version} is not earlier than the version shown (${expect}): pick an earlier one.`,
        { field: "version" },
      );
    }
    const user = this.#options.user;
    const past = await this.#store.stateAt(handle, version, { user });
    try {
      const snap = await this.#store.save(handle, past.state, {
        user,
        expectVersion: expect,
        writer: this.#options.writer,
      });
      return json({ ok: true, handle, version: snap.version, restored_version: version });
    } catch (e) {
      if (!(e instanceof StaleWrite)) throw e;
      const current = e.details.current as { version?: number; last_writer?: string | null };
      const by = current.last_writer ? ` by ${current.last_writer}` : "";
      return json({
        error: {
          code: "stale_write",
          message:
            `Not restored: version ${current.version} was written${by} after the version ${expect} this page showed, and nothing was changed. Look at version ${current.version}, then restore version ${version} again if you still want it.`,
          expected_version: expect,
          current_version: current.version ?? null,
        },
      }, 409);
    }
  }

  /** A stream of `change` events: of one handle (its watch), or of the list (a poll). */
  #events(request: Request, handle: string | null): Response {
    const stop = new AbortController();
    this.#streams.add(stop);
    request.signal.addEventListener("abort", () => stop.abort());
    const user = this.#options.user;
    const store = this.#store;
    const encoder = new TextEncoder();
    const body = new ReadableStream<Uint8Array>({
      start: (controller) => {
        const send = (event: string, data: unknown) => {
          if (stop.signal.aborted) return;
          try {
            controller.enqueue(
              encoder.encode(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`),
            );
          } catch {
            stop.abort();
          }
        };
        const run = handle
          ? (async () => {
            for await (const snap of store.watch(handle, { user, signal: stop.signal })) {
              send("change", { handle, version: snap.version });
            }
          })()
          : (async () => {
            let last = "";
            let wake = () => {};
            stop.signal.addEventListener("abort", () => wake());
            while (!stop.signal.aborted) {
              const page = await store.listPage(user, { limit: PAGE });
              const sig = page.handles.map((h) => `${h.handle}@${h.version}`).join(",");
              if (sig !== last) send("change", { list: true });
              last = sig;
              let timer: ReturnType<typeof setTimeout> | undefined;
              await new Promise<void>((resolve) => {
                wake = resolve;
                timer = setTimeout(resolve, LIST_POLL_MS);
              });
              clearTimeout(timer);
            }
          })();
        run.catch((e) => {
          if (e instanceof McpStateError) send("gone", e.toPayload());
        }).finally(() => {
          this.#streams.delete(stop);
          try {
            controller.close();
          } catch { /* already closed */ }
        });
      },
      cancel: () => stop.abort(),
    });
    return new Response(body, {
      headers: { "content-type": "text/event-stream; charset=utf-8" },
    });
  }
}

/** A version number: a whole number of at least 1. */
function isVersion(x: unknown): x is number {
  return typeof x === "number" && Number.isSafeInteger(x) && x >= 1;
}

/** A required query parameter. */
function need(q: URLSearchParams, name: string): string {
  const v = q.get(name);
  if (!v) {
    throw new InvalidArgument(`The query needs ${name}.`, { field: name });
  }
  return v;
}
