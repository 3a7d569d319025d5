/**
 * The SQLite backend's statements, prepared once per connection, and the
 * steps every write shares (idempotency, the changelog).
 *
 * @module
 */

import type { DatabaseSync, StatementSync } from "node:sqlite";
import type { ChangeEntry, HandleRecord, Replayed, WriteContext } from "../../backend.ts";
import { type ListDialect, listSql } from "../_sql.ts";
import { ChangeLog } from "./_log.ts";
import { META, RECORD, recordOf, returnArrays, type Row } from "./_rows.ts";

/** At most this many leases in force are scanned per user for a page (see `leases`). */
export const LEASE_SCAN_MAX = 500;
/** Rows deleted per `sweep` transaction. */
export const SWEEP_BATCH = 500;

/**
 * The listing query, its order and filters read from the covering listing
 * index; a filter by kind reads it too (it covers `kind`) and skips the
 * other kinds' entries. Each row of the page then ends with its
 * `forked_from`, read through the primary key from the row's columns stored
 * before the state.
 */
const LIST_DIALECT: ListDialect = {
  from: () =>
    `SELECT ${META}, (SELECT f.forked_from FROM handles AS f ` +
    "WHERE f.user = handles.user AND f.handle = handles.handle) " +
    "FROM handles INDEXED BY handles_by_user_updated",
  user: "user",
  updated: "updated_ms",
  expires: "expires_ms",
  rows: [],
  param: (n) => `?${n}`,
};

/**
 * The listing query with each row's `forked_from` and preview: the index
 * gives the order, the row the rest.
 */
const PREVIEW_DIALECT: ListDialect = {
  ...LIST_DIALECT,
  from: () =>
    `SELECT ${META}, forked_from, preview FROM handles INDEXED BY handles_by_user_updated`,
};

/** The prepared statements of one connection. */
export class Statements {
  readonly begin: StatementSync;
  readonly commit: StatementSync;
  readonly rollback: StatementSync;
  readonly savepoint: StatementSync;
  readonly release: StatementSync;
  readonly rollbackTo: StatementSync;
  readonly read: StatementSync;
  readonly insert: StatementSync;
  readonly saveKeep: StatementSync;
  readonly saveSet: StatementSync;
  readonly updateRow: StatementSync;
  readonly stepKeep: StatementSync;
  readonly stepSet: StatementSync;
  /** A step that also appends to the changelog: the row's tail is written with it. */
  readonly stepKeepTail: StatementSync;
  readonly stepSetTail: StatementSync;
  /** The record and its changelog tail (`log_tail`, the column after {@link RECORD}'s). */
  readonly readWithTail: StatementSync;
  readonly insertRow: StatementSync;
  readonly delete: StatementSync;
  readonly idemGet: StatementSync;
  readonly idemPut: StatementSync;
  readonly sweepUser: StatementSync;
  readonly sweepAll: StatementSync;
  readonly sweepTrashUser: StatementSync;
  readonly sweepTrashAll: StatementSync;
  readonly logAdd: StatementSync;
  readonly logTrim: StatementSync;
  readonly logDrop: StatementSync;
  readonly logDropOrphan: StatementSync;
  /** The changelog: the keyed table and the tails kept in small records' rows. */
  readonly log: ChangeLog;
  readonly inTrash: StatementSync;
  /** The `trashed_until` of one trashed record. */
  readonly trashedUntil: StatementSync;
  readonly toTrash: StatementSync;
  readonly fromTrash: StatementSync;
  readonly trashDelete: StatementSync;
  readonly versionOf: StatementSync;
  readonly usersFirst: StatementSync;
  readonly usersAfter: StatementSync;
  readonly sweepIdem: StatementSync;
  readonly leaseTake: StatementSync;
  readonly leaseOf: StatementSync;
  readonly leaseDrop: StatementSync;
  readonly leasesIn: StatementSync;
  readonly readLeased: StatementSync;
  readonly leasesOfUser: StatementSync;
  readonly leaseOne: StatementSync;
  readonly sweepLeases: StatementSync;
  readonly dataVersion: StatementSync;
  readonly moveRecord: StatementSync;
  readonly moveLog: StatementSync;
  readonly dropLease: StatementSync;
  readonly #db: DatabaseSync;
  readonly #lists = new Map<number, StatementSync>();
  #reseal: { record: StatementSync; entry: StatementSync } | undefined;

  /** Prepares every statement on `db`, whose schema is ready. */
  constructor(db: DatabaseSync) {
    this.#db = db;
    const p = (sql: string) => db.prepare(sql);
    this.begin = p("BEGIN IMMEDIATE");
    this.commit = p("COMMIT");
    this.rollback = p("ROLLBACK");
    this.savepoint = p("SAVEPOINT w");
    this.release = p("RELEASE w");
    this.rollbackTo = p("ROLLBACK TO w");
    this.read = returnArrays(p(`SELECT ${RECORD} FROM handles WHERE user = ? AND handle = ?`));
    // A mint: the record with its first changelog entry (`log_tail`), when it fits.
    this.insert = p(
      "INSERT INTO handles (user, handle, kind, state, version, created_ms, updated_ms, " +
        "expires_ms, last_writer, schema_version, preview, forked_from, log_tail) " +
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (user, handle) DO NOTHING",
    );
    const save = (expires: string) =>
      p(
        `UPDATE handles SET state = ?, version = version + 1, updated_ms = ?, ${expires}` +
          "last_writer = ?, schema_version = COALESCE(?, schema_version), " +
          "preview = COALESCE(?, preview) " +
          "WHERE user = ? AND handle = ? AND version = ? " +
          "AND (expires_ms IS NULL OR expires_ms > ?) " +
          "RETURNING kind, version, created_ms, expires_ms, schema_version, preview, forked_from",
      );
    this.saveKeep = save("");
    this.saveSet = save("expires_ms = ?, ");
    this.updateRow = p(
      "UPDATE handles SET kind = ?, state = ?, version = ?, created_ms = ?, updated_ms = ?, " +
        "expires_ms = ?, last_writer = ?, schema_version = ?, preview = ?, forked_from = ? " +
        "WHERE user = ? AND handle = ?",
    );
    // A step of a read-modify-write: SQLite rewrites the entries of every index
    // holding a column named in SET, so the columns that did not change are
    // left out (the expiry index is rewritten only when the expiry changes).
    const step = (expires: string) =>
      p(
        `UPDATE handles SET state = ?, version = ?, updated_ms = ?, ${expires}last_writer = ?, ` +
          "preview = ? WHERE user = ? AND handle = ?",
      );
    this.stepKeep = step("");
    this.stepSet = step("expires_ms = ?, ");
    // The same with the changelog tail (see ChangeLog.next): one statement rewrites the row once.
    const stepTail = (expires: string) =>
      p(
        `UPDATE handles SET state = ?, version = ?, updated_ms = ?, ${expires}last_writer = ?, ` +
          "preview = ?, log_tail = ? WHERE user = ? AND handle = ?",
      );
    this.stepKeepTail = stepTail("");
    this.stepSetTail = stepTail("expires_ms = ?, ");
    this.readWithTail = returnArrays(
      p(`SELECT ${RECORD}, log_tail FROM handles WHERE user = ? AND handle = ?`),
    );
    this.insertRow = p(
      "INSERT INTO handles (user, handle, kind, state, version, created_ms, updated_ms, " +
        "expires_ms, last_writer, schema_version, preview, forked_from) " +
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
    );
    this.delete = p("DELETE FROM handles WHERE user = ? AND handle = ?");
    this.idemGet = p(
      "SELECT fingerprint, result FROM idempotency " +
        "WHERE user = ? AND scope = ? AND key = ? AND expires_ms > ?",
    );
    this.idemPut = p(
      "INSERT OR REPLACE INTO idempotency (user, scope, key, handle, fingerprint, expires_ms, " +
        "result) VALUES (?, ?, ?, ?, ?, ?, ?)",
    );
    // The swept rows come back, so that their changelogs go in the same transaction.
    const sweep = (table: string, column: string, user: string) =>
      returnArrays(p(
        `DELETE FROM ${table} WHERE rowid IN (SELECT rowid FROM ${table} ` +
          `WHERE ${user}${column} <= ? LIMIT ${SWEEP_BATCH}) RETURNING user, handle`,
      ));
    this.sweepUser = sweep("handles", "expires_ms", "user = ? AND ");
    this.sweepAll = sweep("handles", "expires_ms", "");
    this.sweepTrashUser = sweep("trash", "trashed_until", "user = ? AND ");
    this.sweepTrashAll = sweep("trash", "trashed_until", "");
    this.logAdd = p(
      "INSERT OR REPLACE INTO changes (user, handle, version, at, text) VALUES (?, ?, ?, ?, ?)",
    );
    this.logTrim = p(
      "DELETE FROM changes WHERE user = ? AND handle = ? AND (version <= ? OR at < ?)",
    );
    this.logDrop = p("DELETE FROM changes WHERE user = ? AND handle = ?");
    // A trashed record's changelog, unless a live record of that handle owns it now.
    this.logDropOrphan = p(
      "DELETE FROM changes WHERE user = ?1 AND handle = ?2 " +
        "AND NOT EXISTS (SELECT 1 FROM handles WHERE user = ?1 AND handle = ?2)",
    );
    this.log = new ChangeLog(db);
    ({
      inTrash: this.inTrash,
      trashedUntil: this.trashedUntil,
      toTrash: this.toTrash,
      fromTrash: this.fromTrash,
      trashDelete: this.trashDelete,
    } = prepareTrash(p));
    this.versionOf = p("SELECT version FROM handles WHERE user = ? AND handle = ?");
    // A transfer: the row and its changelog change owner (the usage triggers follow).
    this.moveRecord = p("UPDATE handles SET user = ?3 WHERE user = ?1 AND handle = ?2");
    this.moveLog = p("UPDATE changes SET user = ?3 WHERE user = ?1 AND handle = ?2");
    this.dropLease = p("DELETE FROM leases WHERE user = ? AND handle = ?");
    const users = (start: string) =>
      p(
        "WITH RECURSIVE u(user, n) AS (" +
          `SELECT (SELECT min(user) FROM handles ${start}), 1 ` +
          "UNION ALL SELECT (SELECT min(user) FROM handles WHERE user > u.user), n + 1 " +
          "FROM u WHERE u.user IS NOT NULL AND n < ?" +
          ") SELECT user FROM u WHERE user IS NOT NULL",
      );
    this.usersFirst = users("");
    this.usersAfter = users("WHERE user > ?");
    this.sweepIdem = p(
      "DELETE FROM idempotency WHERE rowid IN (SELECT rowid FROM idempotency " +
        `WHERE expires_ms <= ? LIMIT ${SWEEP_BATCH})`,
    );
    ({
      leaseTake: this.leaseTake,
      leaseOf: this.leaseOf,
      leaseDrop: this.leaseDrop,
      leasesIn: this.leasesIn,
      readLeased: this.readLeased,
      leasesOfUser: this.leasesOfUser,
      leaseOne: this.leaseOne,
      sweepLeases: this.sweepLeases,
    } = prepareLeases(p));
    this.dataVersion = p("PRAGMA data_version");
  }

  /**
   * A transfer's content sealed anew for the new owner (see
   * `TransferContent`): the record's state and preview (user, handle,
   * state, preview), an entry's text (user, handle, version, text).
   * Prepared on first use.
   */
  get reseal(): { record: StatementSync; entry: StatementSync } {
    return this.#reseal ??= {
      record: this.#db.prepare(
        "UPDATE handles SET state = ?3, preview = ?4 WHERE user = ?1 AND handle = ?2",
      ),
      entry: this.#db.prepare(
        "UPDATE changes SET text = ?4 WHERE user = ?1 AND handle = ?2 AND version = ?3",
      ),
    };
  }

  /**
   * The listing query of a shape (see `listFilters`), prepared on first use;
   * with `previews`, each row ends with the `preview` column, read from the
   * row itself (the covering index leaves it out, so that a write rewrites
   * no more of the index than before).
   */
  list(shape: number, previews = false): StatementSync {
    const key = previews ? -1 - shape : shape;
    let stmt = this.#lists.get(key);
    if (!stmt) {
      const dialect = previews ? PREVIEW_DIALECT : LIST_DIALECT;
      stmt = returnArrays(this.#db.prepare(listSql(shape, dialect)));
      this.#lists.set(key, stmt);
    }
    return stmt;
  }

  /** Forgets the listing queries (the connection is closing). */
  clear(): void {
    this.#lists.clear();
  }

  /** The record of `(user, handle)`, or `null`. */
  readRow(user: string, handle: string): HandleRecord | null {
    const row = this.read.get(user, handle) as Row | undefined;
    return row ? recordOf(handle, row) : null;
  }

  /** The replay of a write whose idempotency key was seen, if any. */
  replay(user: string, ctx: WriteContext): Replayed | undefined {
    const c = ctx.idempotency;
    if (!c) return undefined;
    const row = this.idemGet.get(user, c.scope, c.key, ctx.now);
    if (!row) return undefined;
    const result = row.result === null ? null : JSON.parse(row.result as string) as HandleRecord;
    return { replayed: true, fingerprint: row.fingerprint as string, result };
  }

  /**
   * Stores the result of a write of `(user, handle)` that carries an
   * idempotency key (the row names the handle it holds content of).
   */
  remember(user: string, handle: string, ctx: WriteContext, result: HandleRecord | null): void {
    const c = ctx.idempotency;
    if (!c) return;
    this.idemPut.run(
      user,
      c.scope,
      c.key,
      handle,
      c.fingerprint,
      c.expiresAt,
      result && JSON.stringify(result),
    );
  }

  /**
   * Appends `entry` to the handle's changelog, first dropping what the
   * retention no longer keeps. With `stateBytes` (UTF-8 bytes of the
   * record's state after the write), the entry may stay in the record's row
   * (see `ChangeLog`).
   */
  append(
    user: string,
    handle: string,
    entry: ChangeEntry,
    ctx: WriteContext,
    stateBytes?: number,
  ): void {
    this.log.append(user, handle, entry, ctx.retention, ctx.now, stateBytes);
  }
}

/** The lease statements, prepared with `p`. */
function prepareLeases(p: (sql: string) => StatementSync) {
  // Stores the lease unless another holder's is still in force.
  const leaseTake = p(
    "INSERT INTO leases (user, handle, holder, expires_at) VALUES (?1, ?2, ?3, ?4) " +
      "ON CONFLICT (user, handle) DO UPDATE SET holder = excluded.holder, " +
      "expires_at = excluded.expires_at " +
      "WHERE leases.holder = excluded.holder OR leases.expires_at <= ?5 " +
      "RETURNING holder, expires_at",
  );
  const leaseOf = p("SELECT holder, expires_at FROM leases WHERE user = ? AND handle = ?");
  const leaseDrop = p(
    "DELETE FROM leases WHERE user = ? AND handle = ? AND holder = ? RETURNING expires_at",
  );
  const leasesIn = returnArrays(p(
    "SELECT handle, holder, expires_at FROM leases WHERE user = ? " +
      "AND handle IN (SELECT value FROM json_each(?)) AND expires_at > ?",
  ));
  // A get: the record and its lease in force, in one statement.
  const readLeased = returnArrays(p(
    "SELECT h.kind, h.state, h.version, h.created_ms, h.updated_ms, h.expires_ms, " +
      "h.last_writer, h.schema_version, h.preview, h.forked_from, l.holder, l.expires_at " +
      "FROM handles h " +
      "LEFT JOIN leases l " +
      "ON l.user = h.user AND l.handle = h.handle AND l.expires_at > ?3 " +
      "WHERE h.user = ?1 AND h.handle = ?2",
  ));
  // A page of handles: the user's leases in force are few (they lapse within
  // minutes, and sweeps drop them), so one range scan of the primary key
  // beats a lookup per handle; past LEASE_SCAN_MAX rows, the lookups win.
  const leasesOfUser = returnArrays(p(
    "SELECT handle, holder, expires_at FROM leases WHERE user = ? AND expires_at > ? " +
      `LIMIT ${LEASE_SCAN_MAX + 1}`,
  ));
  // One handle: a primary-key lookup, without json_each.
  const leaseOne = returnArrays(p(
    "SELECT handle, holder, expires_at FROM leases " +
      "WHERE user = ? AND handle = ? AND expires_at > ?",
  ));
  const sweepLeases = p(
    "DELETE FROM leases WHERE rowid IN (SELECT rowid FROM leases " +
      `WHERE expires_at <= ? LIMIT ${SWEEP_BATCH})`,
  );
  return {
    leaseTake,
    leaseOf,
    leaseDrop,
    leasesIn,
    readLeased,
    leasesOfUser,
    leaseOne,
    sweepLeases,
  };
}

/** The statements of the trash table, prepared with `p`. */
function prepareTrash(p: (sql: string) => StatementSync) {
  const inTrash = p("SELECT 1 AS x FROM trash WHERE user = ? AND handle = ?");
  const trashedUntil = p("SELECT trashed_until FROM trash WHERE user = ? AND handle = ?");
  const toTrash = p(
    "INSERT OR REPLACE INTO trash (user, handle, kind, state, version, created_ms, " +
      "updated_ms, expires_ms, last_writer, schema_version, preview, forked_from, " +
      "trashed_until) SELECT user, handle, kind, state, version, created_ms, updated_ms, " +
      "expires_ms, last_writer, schema_version, preview, forked_from, ? FROM handles " +
      "WHERE user = ? AND handle = ?",
  );
  const fromTrash = returnArrays(p(
    `SELECT ${RECORD} FROM trash WHERE user = ? AND handle = ? AND trashed_until > ?`,
  ));
  const trashDelete = p("DELETE FROM trash WHERE user = ? AND handle = ?");
  return { inTrash, trashedUntil, toTrash, fromTrash, trashDelete };
}
