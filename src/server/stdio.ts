/**
 * Live updates on stdio: a connection's subscriptions — `subscriptions/listen`
 * streams (2026-07-28) or `resources/subscribe` (2025 revisions, whose stdio
 * connection is long-lived) — follow their handles on the store's change
 * feed, and `notifications/resources/updated` goes out through the
 * connection's server instance.
 *
 * @module
 */

import type {
  JSONRPCMessage,
  McpServer,
  Transport,
  TransportSendOptions,
} from "@modelcontextprotocol/server";
import type { HandleStore } from "../store.ts";
import { handleOfUri, LiveUpdates } from "./live.ts";

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
   */
  constructor(store: HandleStore, user: string) {
    this.#user = user;
    this.#live = new LiveUpdates(store, (uri) => {
      for (const s of this.#servers) {
        if (s.isConnected()) s.server.sendResourceUpdated({ uri }).catch(() => {});
      }
    });
  }

  /**
   * Wraps the connection's transport to see its `subscriptions/listen`
   * requests and their `notifications/cancelled`.
   *
   * @param inner The transport.
   * @returns A transport to hand to `serveStdio`.
   */
  wrap(inner: Transport): Transport {
    const tap = (message: JSONRPCMessage) => this.#tap(message);
    const end = () => this.#endAll();
    const outer: Transport = {
      start: () => inner.start(),
      send: (message: JSONRPCMessage, options?: TransportSendOptions) =>
        inner.send(message, options),
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
      queue = queue.then(() => wait).then(() => {
        queued--;
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
        await this.#follow(`legacy:${req.params.uri}`, [req.params.uri]);
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

  /** Sees one inbound message; for a listen request, what to wait for before passing it on. */
  #tap(message: JSONRPCMessage): Promise<void> | undefined {
    const m = message as { method?: string; id?: unknown; params?: Record<string, unknown> };
    if (m.method === "subscriptions/listen" && m.id !== undefined) {
      const uris = (m.params?.notifications as { resourceSubscriptions?: unknown } | undefined)
        ?.resourceSubscriptions;
      if (Array.isArray(uris)) return this.#follow(JSON.stringify(m.id), uris.map(String));
    } else if (m.method === "notifications/cancelled") {
      this.#end(JSON.stringify(m.params?.requestId));
    }
    return undefined;
  }

  #follow(key: string, uris: string[]): Promise<void> {
    const handles = uris.map(handleOfUri).filter((h) => h !== undefined);
    const stop = new AbortController();
    this.#end(key);
    this.#subs.set(key, stop);
    return this.#live.follow(this.#user, handles, stop.signal);
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
