/**
 * The PostgreSQL backend's guesses (private to the package): the records it
 * last read or wrote, which let a read-modify-write step be one statement
 * while the row is still the one guessed.
 *
 * @module
 */

import type { Change, HandleRecord, UpdateOutcome, WriteContext } from "../../backend.ts";
import { ByteCappedCache } from "../_cache.ts";
import type { Pool } from "./_pool.ts";
import { entryParams, leasedOutcome, payloadOf, recordParams } from "./_rows.ts";
import { forkedFromText } from "../_sql.ts";
import type { Statements } from "./_statements.ts";

/**
 * How long after a guess of a handle missed (another process wrote it) its
 * steps skip the guess, in ms: a handle that several processes write in turn
 * would otherwise pay a statement that finds the row moved on every write.
 */
const CONTENDED_MS = 10_000;

/** The key of `(user, handle)` among the guesses: the user's length first, so that no two meet. */
function guessKey(user: string, handle: string): string {
  return `${user.length}:${user}${handle}`;
}

/** The records one backend last saw, and the handles whose guesses missed lately. */
export class Guesses {
  /**
   * Records this backend last read or wrote, by user and handle: guesses
   * that let a read-modify-write step skip its locked read (see
   * `PostgresBackend.update`). States up to 64 KiB, 4 MiB in all.
   */
  readonly #records = new ByteCappedCache<HandleRecord>(65_536, 4_194_304, (r) => r.state.length);
  /**
   * When a guess of each handle last missed (another process wrote it): for
   * {@link CONTENDED_MS} after, its steps go straight to the transaction
   * rather than pay a statement that finds the row moved again.
   */
  readonly #missed = new Map<string, number>();

  /** Remembers `record` as the last seen of `(user, handle)` (`null`: forgets it). */
  set(user: string, handle: string, record: HandleRecord | null): void {
    this.#records.set(guessKey(user, handle), record && { ...record });
  }

  /**
   * The last record seen of `(user, handle)`, for a step to start from;
   * `undefined` when there is none or its guesses missed lately.
   */
  get(user: string, handle: string): HandleRecord | undefined {
    const key = guessKey(user, handle);
    const guess = this.#records.get(key);
    const missed = this.#missed.get(key);
    const contended = missed !== undefined && Date.now() - missed < CONTENDED_MS;
    if (missed !== undefined && !contended) this.#missed.delete(key);
    return contended ? undefined : guess;
  }

  /**
   * Whether this backend keeps no record of `(user, handle)` (none seen, or
   * too large to keep) and its guesses did not miss lately: a step may then
   * read the row with a plain statement and write its guess from it.
   */
  unseen(user: string, handle: string): boolean {
    const key = guessKey(user, handle);
    const missed = this.#missed.get(key);
    if (missed !== undefined && Date.now() - missed < CONTENDED_MS) return false;
    return this.#records.get(key) === undefined;
  }

  /**
   * A step computed from `guess`, a record this backend saw, and written in
   * one statement only while the row is still that record (`writeGuessed`):
   * one round trip. `undefined` when the guess is stale or the step needs the
   * locked read (`change` threw on it, or writes nothing).
   */
  async write(
    pool: Pool,
    q: Statements,
    user: string,
    handle: string,
    guess: HandleRecord,
    change: Change,
    ctx: WriteContext,
  ): Promise<UpdateOutcome | undefined> {
    let next: ReturnType<Change>;
    try {
      next = change({ ...guess });
    } catch {
      return undefined; // decided on the locked row
    }
    const record = next?.record;
    if (!next || !record) return undefined;
    const lease = ctx.lease;
    const entry = next.entry;
    const params: unknown[] = [
      user,
      ...recordParams(record),
      ...(entry ? entryParams(entry, ctx) : [record.version, ctx.now, "", 0, 0]),
      record.schemaVersion ?? null,
      record.preview ?? null,
      forkedFromText(record),
      guess.version,
      guess.createdAt,
      guess.updatedAt,
      guess.expiresAt,
      payloadOf(user, handle),
      entry !== undefined,
      ...(lease ? [lease.holder, lease.expiresAt, ctx.now] : []),
    ];
    const text = lease ? q.writeGuessedLeased : q.writeGuessed;
    const [row] = await pool.op((sql) => sql.unsafe(text, params as never[]).values());
    if (!row) {
      // Stale: the locked step decides, and the next ones for a while (see `#missed`).
      const key = guessKey(user, handle);
      if (this.#missed.size >= 1024) this.#missed.clear();
      this.#missed.set(key, Date.now());
      return void this.set(user, handle, null);
    }
    this.set(user, handle, record);
    const out = { record: { ...record }, written: true };
    return lease ? leasedOutcome(out, ctx, row.slice(1)) : out;
  }
}
