/**
 * Live updates on stdio: a connection's subscriptions — `subscriptions/listen`
 * streams (2026-07-28) or `resources/subscribe` (2025 revisions, whose stdio
 * connection is long-lived) — follow their handles on the store's change
 * feed, and `notifications/resources/updated` goes out through the
 * connection's server instance.
 *
 * @module
 */

import {
  type JSONRPCMessage,
  ProtocolError,
  type Transport,
  type TransportSendOptions,
} from "@modelcontextprotocol/server";
import type { HandleStore, McpServer } from "./types.ts";
import { handleOfUri, ListenLimitError, type ListenLimits, LiveUpdates } from "./live.ts";
import type { Telemetry } from "./telemetry.ts";

/** The live-update side of one stdio connection. */
export class StdioLive {
  readonly #user: string;
  readonly #live: LiveUpdates;
  readonly #servers = new Set<McpServer>();
  readonly #subs = new Map<string, AbortController>();

  /**
   * Creates the live side of a connection.
   *
   * @param store The store the connection serves.
   * @param user The one user of the connection.
   * @param limits Bounds on its open `subscriptions/listen` streams and watched handles.
   * @param telemetry Metrics whose live-update gauges read the connection's subscriptions.
   */
  constructor(
    store: HandleStore,
    user: string,
    limits: ListenLimits = {},
    telemetry?: Telemetry,
  ) {
    this.#user = user;
    this.#live = new LiveUpdates(
      store,
      (uri) => {
        for (const s of this.#servers) {
          if (s.isConnected()) s.server.sendResourceUpdated({ uri }).catch(() => {});
        }
      },
      limits,
      telemetry,
    );
  }

  /**
   * Wraps the connection's transport to see its `subscriptions/listen`
   * requests and their `notifications/cancelled`.
   *
   * @param inner The transport.
   * @returns A transport to hand to `serveStdio`.
   */
  wrap(inner: Transport): Transport {
    const tap = (message: JSONRPCMessage) => this.#tap(message, inner);
    const end = () => this.#endAll();
    const outer: Transport = {
      start: () => inner.start(),
      send: (message: JSONRPCMessage, options?: TransportSendOptions) => {
        // A listen request is answered only when its subscription ends
        // (refused, or closed by the server): its slot is free again.
        const m = message as { id?: unknown; result?: unknown; error?: unknown };
        if (m.id !== undefined && ("result" in m || "error" in m)) this.#end(JSON.stringify(m.id));
        return inner.send(message, options);
      },
      close: () => {
        end();
        return inner.close();
      },
    };
    // A listen request is passed on (and so acknowledged) only once its
    // watches have their starting versions; later messages wait behind it,
    // in order.
    let queue: Promise<void> = Promise.resolve();
    let queued = 0;
    inner.onmessage = (message, extra) => {
      const wait = tap(message);
      if (wait === undefined && queued === 0) {
        outer.onmessage?.(message, extra);
        return;
      }
      queued++;
      queue = queue.then(() => wait).then((pass) => {
        queued--;
        if (pass === false) return;
        try {
          outer.onmessage?.(message, extra);
        } catch (e) {
          outer.onerror?.(e instanceof Error ? e : new Error(String(e)));
        }
      });
    };
    inner.onclose = () => {
      end();
      outer.onclose?.();
    };
    inner.onerror = (e) => outer.onerror?.(e);
    return outer;
  }

  /**
   * Records a server instance the entry made, to send notifications
   * through; a 2025-era instance also answers `resources/subscribe` and
   * `resources/unsubscribe`.
   *
   * @param server The instance.
   * @param era Its protocol era.
   * @returns The same instance.
   */
  adopt(server: McpServer, era: "legacy" | "modern"): McpServer {
    this.#servers.add(server);
    if (era === "legacy") {
      server.server.setRequestHandler("resources/subscribe", async (req) => {
        try {
          await this.#follow(`legacy:${req.params.uri}`, [req.params.uri], false);
        } catch (e) {
          if (!(e instanceof ListenLimitError)) throw e;
          throw new ProtocolError(e.code, e.message, { limit: e.limit, max: e.max });
        }
        return {};
      });
      server.server.setRequestHandler("resources/unsubscribe", (req) => {
        this.#end(`legacy:${req.params.uri}`);
        return {};
      });
    }
    return server;
  }

  /** Ends every follow of this connection. */
  close(): void {
    this.#endAll();
    this.#live.close();
  }

  /**
   * Sees one inbound message; for a listen request, what to wait for before
   * passing it on: `false` when it was refused over a limit (answered here,
   * through `inner`, and not passed on).
   */
  #tap(message: JSONRPCMessage, inner: Transport): Promise<boolean> | undefined {
    const m = message as { method?: string; id?: unknown; params?: Record<string, unknown> };
    if (m.method === "subscriptions/listen" && m.id !== undefined) {
      const filter = m.params?.notifications as { resourceSubscriptions?: unknown } | undefined;
      const uris = Array.isArray(filter?.resourceSubscriptions)
        ? filter.resourceSubscriptions.filter((u): u is string => typeof u === "string")
        : [];
      const id = m.id as string | number;
      return this.#follow(JSON.stringify(id), uris).then(() => true, async (e) => {
        if (!(e instanceof ListenLimitError)) return true;
        this.#end(JSON.stringify(id));
        await inner.send({
          jsonrpc: "2.0",
          id,
          error: { code: e.code, message: e.message, data: { limit: e.limit, max: e.max } },
        }).catch(() => {});
        return false;
      });
    } else if (m.method === "notifications/cancelled") {
      this.#end(JSON.stringify(m.params?.requestId));
    }
    return undefined;
  }

  #follow(key: string, uris: string[], stream = true): Promise<void> {
    const handles = uris.map(handleOfUri).filter((h) => h !== undefined);
    const stop = new AbortController();
    this.#end(key);
    this.#subs.set(key, stop);
    return this.#live.follow(this.#user, handles, stop.signal, { stream });
  }

  #end(key: string): void {
    this.#subs.get(key)?.abort();
    this.#subs.delete(key);
  }

  #endAll(): void {
    for (const c of this.#subs.values()) c.abort();
    this.#subs.clear();
  }
}
