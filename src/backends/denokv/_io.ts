/**
 * How the Deno KV backend calls Deno KV: every call retried while another
 * process holds the file ("database is locked"), an access token never shown
 * in a message, and the pause between optimistic attempts.
 *
 * @module
 */

import { BackendError, McpStateError, redact } from "../../errors.ts";
import { retryWhile, untilTimeout } from "../_retry.ts";
import { Raced } from "./_codec.ts";
import type { Keys } from "./_keys.ts";

const LOCKED_RE = /database (table )?is locked|SQLITE_BUSY|database is busy/i;

/** One backend's `Deno.Kv`, its keys, and how its calls run. */
export class KvIo {
  /** The KV. */
  readonly kv: Deno.Kv;
  /** The key layout. */
  readonly keys: Keys;
  /** How long one call keeps retrying under contention, ms. */
  readonly timeoutMs: number;
  /** The KV Connect access token, never shown in a message. */
  secret: string | undefined;

  /**
   * @param kv The KV.
   * @param keys The key layout.
   * @param timeoutMs How long one call keeps retrying under contention, ms.
   */
  constructor(kv: Deno.Kv, keys: Keys, timeoutMs: number) {
    this.kv = kv;
    this.keys = keys;
    this.timeoutMs = timeoutMs;
  }

  /** Runs one KV call, retrying "database is locked" with a jittered backoff. */
  async io<T>(fn: () => Promise<T>): Promise<T> {
    try {
      return await retryWhile(fn, isLocked, Date.now() + this.timeoutMs);
    } catch (e) {
      if (isLocked(e)) {
        throw new BackendError(
          `Deno KV stayed locked by another process for ${this.timeoutMs} ms. Nothing was changed by this call; try again.`,
          { cause: e },
        );
      }
      if (e instanceof McpStateError || e instanceof Raced) throw e;
      const msg = e instanceof Error ? e.message : String(e);
      if (this.secret && msg.includes(this.secret)) {
        throw new BackendError(scrub(msg, this.secret), { cause: e });
      }
      throw e;
    }
  }

  /** Builds and commits an atomic operation (built afresh for every lock retry). */
  commit(
    build: (op: Deno.AtomicOperation) => void,
  ): Promise<Deno.KvCommitResult | Deno.KvCommitError> {
    return this.io(() => {
      const op = this.kv.atomic();
      build(op);
      return op.commit();
    });
  }

  get<T>(key: Deno.KvKey): Promise<Deno.KvEntryMaybe<T>> {
    return this.io(() => this.kv.get<T>(key));
  }

  /** Reads a whole range; `stop` ends it early (the first entry it refuses is dropped). */
  range<T>(
    selector: Deno.KvListSelector,
    options: { batchSize?: number; limit?: number } = {},
    stop?: (entry: Deno.KvEntry<T>) => boolean,
  ): Promise<Deno.KvEntry<T>[]> {
    return this.io(async () => {
      const out: Deno.KvEntry<T>[] = [];
      for await (const e of this.kv.list<T>(selector, options)) {
        if (stop?.(e)) break;
        out.push(e);
      }
      return out;
    });
  }

  /**
   * The pause between optimistic attempts on `handle`: a backoff, until the
   * contention timeout (counted from this call) has passed.
   */
  contended(handle: string): (attempt: number) => Promise<void> {
    return untilTimeout(this.timeoutMs, () =>
      new BackendError(
        `Too many concurrent writers on "${handle}": gave up after ${this.timeoutMs} ms. Nothing was applied by this call; try again.`,
      ));
  }
}

/** Whether an error is "database is locked" from another process on the same file. */
export function isLocked(e: unknown): boolean {
  return LOCKED_RE.test(e instanceof Error ? e.message : String(e));
}

/** A message without `secret` (and with credentials redacted). */
export function scrub(text: string, secret: string | undefined): string {
  const out = secret ? text.replaceAll(secret, "***") : text;
  return redact(out);
}
