/**
 * The options of the Deno KV backend and their checks (private to the
 * package).
 *
 * @module
 */

import { InvalidArgument } from "../../errors.ts";

/** Options of {@link DenoKvBackend}. */
export interface DenoKvBackendOptions {
  /**
   * Key prefix under which every key of this backend lives, so one Deno KV
   * can hold other data too. At most 4 parts of at most 64 characters or
   * bytes each. Default `["mcpstate"]`.
   */
  prefix?: Deno.KvKey;
  /**
   * Age (ms of wall-clock time) after which `sweep` collects the chunks of a
   * write that never swapped its head in (a crashed writer's). Default
   * 300,000 (5 minutes).
   */
  orphanAgeMs?: number;
  /**
   * How long (ms) one call keeps retrying when other writers keep winning
   * the same record, or another process keeps the KV file locked, before it
   * gives up with `backend_error`. Default 30,000.
   */
  contentionTimeoutMs?: number;
  /**
   * Whether {@link DenoKvBackend.close} also closes the `Deno.Kv`. Default
   * `false`: an injected `Deno.Kv` stays the caller's;
   * {@link DenoKvBackend.fromUrl} sets it.
   */
  closeKv?: boolean;
}

/** `ms` when it is a number of milliseconds, 0 or more; throws `invalid_argument` naming `field` otherwise. */
export function checkMs(ms: number, field: string): number {
  if (typeof ms !== "number" || !Number.isFinite(ms) || ms < 0) {
    throw new InvalidArgument(`${field} must be a number of milliseconds, 0 or more.`, { field });
  }
  return ms;
}
