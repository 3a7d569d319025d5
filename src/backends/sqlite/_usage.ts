/**
 * Per-user usage on SQLite (quotas): a `usage` table of one row per user,
 * kept right by triggers on `handles`, whoever writes (this release with or
 * without quotas, an import, a sweep, the trash, an older release on the
 * same file), and checked inside the write's own transaction.
 *
 * - A row exists only for users whose usage was asked for or checked; the
 *   triggers update rows that exist and cost one index probe otherwise.
 * - A missing row is rebuilt from the records, in the transaction that
 *   needs it (so a file written before quotas existed starts right).
 * - The table and triggers are made by their own step, independent of the
 *   schema number, each time a connection opens: when a trigger was missing
 *   (a new file, a file from before quotas, or a migration that rebuilt
 *   `handles`), every row is dropped, to be rebuilt on demand.
 *
 * @module
 */

import type { DatabaseSync, StatementSync } from "node:sqlite";
import type { Usage, WriteContext } from "../../backend.ts";
import { checkQuota, MINUTE_MS, type UsageDelta, writesAt } from "../_quota.ts";

const TRIGGERS = {
  usage_after_insert: `AFTER INSERT ON handles BEGIN
  UPDATE usage SET handles = handles + 1, bytes = bytes + octet_length(NEW.state)
    WHERE user = NEW.user;
END`,
  usage_after_delete: `AFTER DELETE ON handles BEGIN
  UPDATE usage SET handles = handles - 1, bytes = bytes - octet_length(OLD.state)
    WHERE user = OLD.user;
END`,
  usage_after_update: `AFTER UPDATE OF user, state ON handles BEGIN
  UPDATE usage SET handles = handles - 1, bytes = bytes - octet_length(OLD.state)
    WHERE user = OLD.user;
  UPDATE usage SET handles = handles + 1, bytes = bytes + octet_length(NEW.state)
    WHERE user = NEW.user;
END`,
};

/**
 * Creates the `usage` table and its triggers when absent, in one
 * `BEGIN IMMEDIATE` transaction; clears the table when a trigger was missing.
 *
 * @param db An open connection whose schema is prepared.
 */
export function prepareUsage(db: DatabaseSync): void {
  const present = () =>
    db.prepare(
      "SELECT count(*) AS n FROM sqlite_master WHERE type = 'trigger' AND name LIKE 'usage_after_%'",
    ).get()?.n === Object.keys(TRIGGERS).length;
  if (present()) return;
  db.exec("BEGIN IMMEDIATE");
  try {
    if (!present()) {
      db.exec(
        "CREATE TABLE IF NOT EXISTS usage (user TEXT PRIMARY KEY, handles INTEGER NOT NULL, " +
          "bytes INTEGER NOT NULL, minute INTEGER NOT NULL, writes INTEGER NOT NULL) WITHOUT ROWID",
      );
      for (const [name, body] of Object.entries(TRIGGERS)) {
        db.exec(`CREATE TRIGGER IF NOT EXISTS ${name} ${body}`);
      }
      // Rows kept while a trigger was missing may be wrong: rebuild them on demand.
      db.exec("DELETE FROM usage");
    }
    db.exec("COMMIT");
  } catch (e) {
    if (db.isTransaction) db.exec("ROLLBACK");
    throw e;
  }
}

/** The usage statements of one connection. */
export class UsageStatements {
  readonly #get: StatementSync;
  readonly #rebuild: StatementSync;
  readonly #count: StatementSync;
  readonly #size: StatementSync;

  /** @param db The connection, prepared by {@link prepareUsage}. */
  constructor(db: DatabaseSync) {
    this.#get = db.prepare("SELECT handles, bytes, minute, writes FROM usage WHERE user = ?");
    this.#rebuild = db.prepare(
      "INSERT INTO usage (user, handles, bytes, minute, writes) " +
        "SELECT ?1, count(*), coalesce(sum(octet_length(state)), 0), 0, 0 FROM handles WHERE user = ?1 " +
        "RETURNING handles, bytes, minute, writes",
    );
    this.#count = db.prepare(
      "UPDATE usage SET writes = CASE WHEN minute = ?2 THEN writes + 1 ELSE 1 END, minute = ?2 " +
        "WHERE user = ?1",
    );
    this.#size = db.prepare(
      "SELECT octet_length(state) AS n FROM handles WHERE user = ? AND handle = ?",
    );
  }

  /**
   * The user's usage, its row rebuilt from the records when absent. Inside
   * a write transaction only (it may insert the row).
   */
  read(user: string, now: number): Usage {
    const row = this.#get.get(user) ?? this.#rebuild.get(user)!;
    return {
      handles: row.handles as number,
      bytes: row.bytes as number,
      writesThisMinute: writesAt(row.minute as number, row.writes as number, now),
    };
  }

  /** UTF-8 bytes of a live record's state (0 when there is none). */
  sizeOf(user: string, handle: string): number {
    return (this.#size.get(user, handle)?.n as number | undefined) ?? 0;
  }

  /**
   * After a write of `delta` in the current transaction (the triggers have
   * counted it): checks `ctx.quota` against the usage before it, throwing
   * `QuotaExceeded` (the caller's transaction rolls back), and counts the write.
   */
  apply(user: string, ctx: WriteContext, delta: UsageDelta): void {
    const quota = ctx.quota;
    if (!quota) return;
    const after = this.read(user, ctx.now);
    const before = {
      handles: after.handles - delta.handles,
      bytes: after.bytes - delta.bytes,
      writesThisMinute: after.writesThisMinute,
    };
    checkQuota(quota, before, delta, ctx.now);
    this.#count.run(user, Math.floor(ctx.now / MINUTE_MS));
  }
}
