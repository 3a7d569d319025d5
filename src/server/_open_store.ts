/**
 * How a server opens its store: the backend at a URL, instrumented for
 * metrics and traces when the server has telemetry, under one
 * `HandleStore`. `mcpstate serve` opens its store here, so the CLI itself
 * never opens a backend.
 *
 * @module
 */

import { HandleStore } from "../store.ts";
import type { HandleStoreOptions } from "../types.ts";
import { openBackend } from "../url.ts";
import type { Telemetry } from "./telemetry.ts";

/**
 * Opens the store at `url` for a server.
 *
 * @param url A backend URL (`sqlite:///…`, `redis://…`, …).
 * @param options The store's options.
 * @param telemetry When given, every backend operation is timed and traced by it.
 * @returns The open store; the caller closes it.
 */
export async function openServedStore(
  url: string,
  options: HandleStoreOptions,
  telemetry?: Telemetry,
): Promise<HandleStore> {
  const backend = await openBackend(url);
  return new HandleStore(telemetry ? telemetry.instrument(backend) : backend, options);
}
