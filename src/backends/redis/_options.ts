/**
 * The options of the Redis backend and their checks (private to the package).
 *
 * @module
 */

import { InvalidArgument } from "../../errors.ts";
import { DEFAULT_PREFIX } from "./_url.ts";

/** Options of {@link RedisBackend}. */
export interface RedisBackendOptions {
  /** Prefix of every key. Default `mcpstate:`. Must not contain `{` or `}`. */
  prefix?: string;
  /**
   * Replicas that must confirm each write (`WAIT`) before it is
   * acknowledged. Default 0: acknowledged once the primary applied it.
   */
  waitReplicas?: number;
  /** How long a write waits for those replicas, in ms. Default 1000. */
  waitTimeoutMs?: number;
  /**
   * When calls have waited this long (ms) with no reply at all, drop the
   * connection so they fail with `backend_error` and the client reconnects.
   * Default: off for a client you pass in; `fromUrl` sets 5000 (`timeout`).
   */
  timeoutMs?: number;
  /**
   * Whether {@link RedisBackend.close} closes the client. Default `false`
   * for a client you pass in (you opened it, you close it); `fromUrl` sets it.
   */
  closeClient?: boolean;
}

/** The options' values, checked, with their defaults. */
export interface CheckedOptions {
  /** The key prefix. */
  prefix: string;
  /** Replicas each write waits for. */
  wait: number;
  /** How long a write waits for them, ms. */
  waitTimeout: number;
  /** When calls without a reply drop the connection, ms (`undefined`: never). */
  timeout: number | undefined;
}

/**
 * The values of `options` with their defaults.
 *
 * @throws {InvalidArgument} for a prefix with `{` or `}`, or a count or time
 *   that is not a whole number in range.
 */
export function checkOptions(options: RedisBackendOptions): CheckedOptions {
  const prefix = options.prefix ?? DEFAULT_PREFIX;
  if (typeof prefix !== "string" || /[{}]/.test(prefix)) {
    throw new InvalidArgument("The Redis key prefix must be a string without { or }.", {
      field: "prefix",
    });
  }
  const wait = options.waitReplicas ?? 0;
  const waitTimeout = options.waitTimeoutMs ?? 1000;
  if (!Number.isSafeInteger(wait) || wait < 0) {
    throw new InvalidArgument("wait must be a whole number of replicas, 0 or more.", {
      field: "wait",
    });
  }
  if (!Number.isSafeInteger(waitTimeout) || waitTimeout < 1) {
    throw new InvalidArgument("waitTimeout must be a whole number of milliseconds, at least 1.", {
      field: "waitTimeout",
    });
  }
  const timeout = options.timeoutMs;
  if (timeout !== undefined && (!Number.isSafeInteger(timeout) || timeout < 1)) {
    throw new InvalidArgument("timeout must be a whole number of milliseconds, at least 1.", {
      field: "timeout",
    });
  }
  return { prefix, wait, waitTimeout, timeout };
}
