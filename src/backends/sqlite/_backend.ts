/**
 * The SQLite backend's class: its primitives over the statements, the
 * connection and its group commit.
 *
 * @module
 */
import { DatabaseSync, type StatementSync } from "node:sqlite";
import { dirname } from "node:path";
import type * as B from "../../backend.ts";
import { auditEntry } from "../../backend.ts";
import { BackendError, InvalidArgument, McpStateError } from "../../errors.ts";
import { messageOf } from "../_shared.ts";
import { listFilters } from "../_sql.ts";
import { Connection } from "./_connection.ts";
import {
  cells,
  forkedFromOf,
  leaseOf,
  META,
  metaOf,
  RECORD_COLUMNS,
  recordOf,
  recordValues,
  returnArrays,
  type Row,
  schemaVersionOf,
} from "./_rows.ts";
import { prepareDatabase } from "./_schema.ts";
import { LEASE_SCAN_MAX, Statements, SWEEP_BATCH } from "./_statements.ts";
import { tailRoom } from "./_log.ts";
import { parseSqliteUrl, type SqliteSynchronous } from "./_url.ts";
import { prepareUsage, UsageStatements } from "./_usage.ts";
import { GrantStatements, prepareGrants } from "./_grants.ts";
import { sqliteErasure } from "./_erase.ts";
import { sqliteKeys } from "./_keys.ts";
import { sqliteContent } from "./_content.ts";
import { utf8Length } from "../../json.ts";

/** Options of {@link SqliteBackend}. */
export interface SqliteBackendOptions {
  /**
   * `"full"` (default): every commit is synced to disk before it returns and
   * survives power loss. `"normal"`: survives a crash of the process, may
   * lose the last commits on power loss; several times the write rate.
   */
  synchronous?: SqliteSynchronous;
  /** How long a write waits for another connection's lock, in ms. Default 10,000. */
  busyTimeoutMs?: number;
  /**
   * Whether {@link SqliteBackend.close} closes the connection. Default
   * `false` for an injected connection; `fromUrl` opens its own and sets it.
   */
  closeDatabase?: boolean;
  /**
   * Group commit, for a file with `synchronous: "full"`: writes that arrive
   * while a commit is being synced share the next transaction (each in its
   * own savepoint) and its one sync, and the sync runs off the event loop;
   * each write is acknowledged once it is on disk, as with SQLite's own
   * `synchronous=FULL`. The connection is switched to `synchronous=NORMAL`
   * and the backend syncs the `-wal` file itself, so every write to the
   * file must go through this backend. Default: on for a connection the
   * backend owns (`closeDatabase`) on Linux and other Unix systems but
   * macOS (whose `fsync` is not a full flush), off otherwise.
   */
  groupCommit?: boolean;
}

/** Keeps handles in one SQLite database file (or in memory). */
export class SqliteBackend implements B.Backend {
  readonly #db: DatabaseSync;
  readonly #closeDb: boolean;
  readonly #q: Statements;
  readonly #c: Connection;
  readonly #u: UsageStatements;
  readonly #g: GrantStatements;
  #trashList: StatementSync | undefined;
  /** {@inheritDoc Backend.erasure} */
  readonly erasure: B.ErasurePrimitives = sqliteErasure(() => ({ db: this.#db, c: this.#c }));
  /** {@inheritDoc Backend.keys} */
  readonly keys: B.KeyPrimitives = sqliteKeys(() => ({ db: this.#db, c: this.#c }));
  /** {@inheritDoc Backend.content} */
  readonly content: B.ContentPrimitives = sqliteContent(() => ({ db: this.#db, c: this.#c }));

  /**
   * Opens a backend from a URL: `sqlite:///~/.mcpstate/state.db` (under the
   * home directory), `sqlite:////abs/path.db`, `sqlite:///relative.db` (from
   * the working directory) or `sqlite:///:memory:`, with an optional
   * `?synchronous=full|normal` (default `full`). The parent directory of the
   * file is created.
   *
   * @param url The URL.
   * @returns The open backend; it owns its connection and closes it on {@link SqliteBackend.close}.
   * @throws {InvalidArgument} for a malformed URL or an unknown option (credentials redacted).
   * @throws {BackendError} when the file cannot be opened or is not an mcpstate database.
   */
  static fromUrl(url: string): Promise<SqliteBackend> {
    try {
      const { path, synchronous } = parseSqliteUrl(url);
      if (path !== ":memory:") Deno.mkdirSync(dirname(path), { recursive: true });
      let db: DatabaseSync;
      try {
        db = new DatabaseSync(path);
      } catch (e) {
        throw new BackendError(
          `Cannot open the SQLite database "${path}": ${
            messageOf(e)
          }. Check the path and its permissions.`,
          { cause: e },
        );
      }
      try {
        return Promise.resolve(new SqliteBackend(db, { synchronous, closeDatabase: true }));
      } catch (e) {
        db.close();
        throw e;
      }
    } catch (e) {
      if (e instanceof McpStateError) return Promise.reject(e);
      return Promise.reject(
        new BackendError(`Cannot open the SQLite database: ${messageOf(e)}`, { cause: e }),
      );
    }
  }

  /**
   * Wraps an open connection: switches it to WAL, sets the busy timeout and
   * the `synchronous` level, and creates or migrates the schema.
   *
   * @param db An open `node:sqlite` connection.
   * @param options Durability, busy timeout, and whether `close` closes `db`.
   * @throws {BackendError} when the database holds a newer or a foreign schema.
   */
  constructor(db: DatabaseSync, options: SqliteBackendOptions = {}) {
    this.#db = db;
    this.#closeDb = options.closeDatabase ?? false;
    const sync = options.synchronous ?? "full";
    if (sync !== "full" && sync !== "normal") {
      throw new InvalidArgument(`synchronous must be "full" or "normal".`);
    }
    const busy = options.busyTimeoutMs ?? 10_000;
    if (!Number.isSafeInteger(busy) || busy < 0) {
      throw new InvalidArgument("busyTimeoutMs must be a whole number of milliseconds.");
    }
    const os = Deno.build.os;
    const group = sync === "full" &&
      (options.groupCommit ?? (this.#closeDb && os !== "darwin" && os !== "windows"));
    prepareDatabase(db, group ? "normal" : sync, busy);
    prepareUsage(db);
    prepareGrants(db);
    this.#q = new Statements(db);
    this.#u = new UsageStatements(db);
    this.#g = new GrantStatements(db);
    this.#c = new Connection(db, this.#q, busy, group);
  }

  /** Whether writes are group-committed (see {@link SqliteBackendOptions.groupCommit}). */
  get groupCommit(): boolean {
    return this.#c.groupCommit;
  }

  /** The connection this backend runs on. */
  get database(): DatabaseSync {
    return this.#db;
  }

  /** {@inheritDoc Backend.insert} */
  insert(
    user: string,
    record: B.HandleRecord,
    ctx: B.WriteContext,
  ): Promise<B.InsertOutcome | B.Replayed> {
    return this.#claim(user, ctx, () => {
      // A trashed handle stays taken until it is restored or swept.
      if (this.#q.inTrash.get(user, record.handle)) return { inserted: false };
      const size = tailRoom(record.state);
      const tail = ctx.entry ? this.#q.log.firstTail(user, record.handle, ctx.entry, size) : null;
      const { changes } = this.#q.insert.run(user, record.handle, ...recordValues(record), tail);
      const inserted = Number(changes) === 1;
      if (inserted) {
        if (ctx.quota) {
          this.#u.apply(user, ctx, { handles: 1, bytes: size ?? utf8Length(record.state) });
        }
        // A new record starts a new log.
        if (ctx.entry) this.#q.log.start(user, record.handle, ctx.entry, tail);
        this.#q.remember(user, record.handle, ctx, record);
        this.#c.wrote(user, record.handle);
      }
      return this.#withLease({ inserted }, user, record.handle, inserted, ctx);
    });
  }

  /** {@inheritDoc Backend.read} */
  read(user: string, handle: string): Promise<B.HandleRecord | null> {
    return this.#c.read(user, handle, () => this.#q.readRow(user, handle));
  }

  /** {@inheritDoc Backend.leases} */
  readonly leases: B.LeasePrimitives = {
    acquire: (user, handle, lease, now) =>
      this.#c.write(() => this.#take(user, handle, lease, now)),
    release: (user, handle, holder, now) => {
      return this.#c.write(() => {
        const row = this.#q.leaseDrop.get(user, handle, holder);
        return row !== undefined && (row.expires_at as number) > now;
      });
    },
    of: (user, handles, now) => {
      return this.#c.run(() => {
        const out = new Map<string, B.LeaseRecord>();
        if (handles.length === 0) return out;
        let rows: Row[];
        if (handles.length === 1) {
          rows = this.#q.leaseOne.all(user, handles[0]!, now) as Row[];
        } else {
          rows = this.#q.leasesOfUser.all(user, now) as Row[];
          if (rows.length > LEASE_SCAN_MAX) {
            rows = this.#q.leasesIn.all(user, JSON.stringify(handles), now) as Row[];
          } else {
            const wanted = new Set(handles);
            rows = rows.filter((r) => wanted.has(cells(r)[0] as string));
          }
        }
        for (const r of rows) {
          const [h, holder, expiresAt] = cells(r);
          out.set(h as string, { holder: holder as string, expiresAt: expiresAt as number });
        }
        return out;
      });
    },
    readLeased: (user, handle, now) => {
      return this.#c.read(user, handle, () => {
        const row = this.#q.readLeased.get(user, handle, now) as Row | undefined;
        if (!row) return { record: null, lease: null };
        const c = cells(row);
        const lease = c[10] == null
          ? null
          : { holder: c[10] as string, expiresAt: c[11] as number };
        return { record: recordOf(handle, row), lease };
      });
    },
  };

  /** {@inheritDoc Backend.save} */
  save(
    user: string,
    handle: string,
    write: B.ConditionalWrite,
    ctx: B.WriteContext,
  ): Promise<B.SaveOutcome | B.Replayed> {
    return this.#claim(user, ctx, (): B.SaveOutcome => {
      this.#g.check(ctx);
      const old = ctx.quota ? this.#u.sizeOf(user, handle) : 0;
      // One conditional UPDATE: version and expiry are checked by the statement itself.
      const row = write.expiresAt === "keep"
        ? this.#q.saveKeep.get(
          write.state,
          write.updatedAt,
          write.lastWriter,
          write.schemaVersion ?? null,
          write.preview ?? null,
          user,
          handle,
          write.expectVersion,
          ctx.now,
        )
        : this.#q.saveSet.get(
          write.state,
          write.updatedAt,
          write.expiresAt,
          write.lastWriter,
          write.schemaVersion ?? null,
          write.preview ?? null,
          user,
          handle,
          write.expectVersion,
          ctx.now,
        );
      if (!row) return { ok: false, current: this.#q.readRow(user, handle) };
      const record: B.HandleRecord = {
        handle,
        kind: row.kind as string,
        state: write.state,
        version: row.version as number,
        createdAt: row.created_ms as number,
        updatedAt: write.updatedAt,
        expiresAt: row.expires_ms as number | null,
        lastWriter: write.lastWriter,
        ...schemaVersionOf(row.schema_version),
        ...forkedFromOf(row.forked_from),
        ...(row.preview == null ? {} : { preview: row.preview as string }),
      };
      if (ctx.quota) this.#u.apply(user, ctx, { handles: 0, bytes: utf8Length(write.state) - old });
      this.#q.remember(user, handle, ctx, record);
      this.#c.wrote(user, handle);
      return this.#withLease({ ok: true as const, record }, user, handle, true, ctx);
    });
  }

  /** {@inheritDoc Backend.update} */
  update(
    user: string,
    handle: string,
    change: B.Change,
    ctx: B.WriteContext,
  ): Promise<B.UpdateOutcome | B.Replayed> {
    return this.#claim(user, ctx, (): B.UpdateOutcome => {
      this.#g.check(ctx);
      const row = this.#q.readWithTail.get(user, handle) as Row | undefined;
      const current = row ? recordOf(handle, row) : null;
      // A throwing change propagates out of #write, which rolls back.
      const step = change(current && { ...current });
      const next = step?.record ?? null;
      if (next) {
        const size = tailRoom(next.state);
        if (
          current && next.kind === current.kind && next.createdAt === current.createdAt &&
          // A typed write that upgrades the schema version rewrites the row (it is rare).
          (next.schemaVersion ?? null) === (current.schemaVersion ?? null)
        ) {
          const { state, version, updatedAt: at, lastWriter: by } = next;
          const p = next.preview ?? null;
          const keep = next.expiresAt === current.expiresAt;
          if (step?.entry) {
            // The entry and the step in one row write (see ChangeLog.next).
            const tailCell = cells(row!)[RECORD_COLUMNS] as string | null;
            const t = this.#q.log.next(
              user,
              handle,
              tailCell,
              step.entry,
              ctx.retention,
              ctx.now,
              size,
            );
            if (keep) this.#q.stepKeepTail.run(state, version, at, by, p, t, user, handle);
            else {
              const exp = next.expiresAt;
              this.#q.stepSetTail.run(state, version, at, exp, by, p, t, user, handle);
            }
          } else if (keep) this.#q.stepKeep.run(state, version, at, by, p, user, handle);
          else this.#q.stepSet.run(state, version, at, next.expiresAt, by, p, user, handle);
        } else {
          if (current) this.#q.updateRow.run(...recordValues(next), user, handle);
          else {
            // A record made from nothing has no history before it.
            this.#q.logDrop.run(user, handle);
            this.#q.insertRow.run(user, handle, ...recordValues(next));
          }
          if (step?.entry) this.#q.append(user, handle, step.entry, ctx, size);
        }
        if (ctx.quota) {
          const bytes = (size ?? utf8Length(next.state)) -
            (current ? utf8Length(current.state) : 0);
          this.#u.apply(user, ctx, { handles: current ? 0 : 1, bytes });
        }
        this.#c.wrote(user, handle);
      }
      const record = next ? { ...next, handle } : current;
      this.#q.remember(user, handle, ctx, record);
      return this.#withLease({ record, written: next !== null }, user, handle, next !== null, ctx);
    });
  }

  /** {@inheritDoc Backend.remove} */
  remove(
    user: string,
    handle: string,
    ctx: B.WriteContext,
  ): Promise<{ removed: boolean } | B.Replayed> {
    return this.#claim(user, ctx, () => {
      // To the trash: the record moves, its changelog stays in the keyed table.
      if (ctx.trashUntil !== undefined) {
        this.#q.log.flush(user, handle);
        this.#q.toTrash.run(ctx.trashUntil, user, handle);
      }
      const removed = Number(this.#q.delete.run(user, handle).changes) === 1;
      if (removed) {
        if (ctx.trashUntil === undefined) this.#q.logDrop.run(user, handle);
        this.#q.remember(user, handle, ctx, null);
        this.#c.wrote(user, handle);
      }
      return { removed };
    });
  }

  /** {@inheritDoc Backend.untrash} */
  untrash(user: string, handle: string, ctx: B.WriteContext): Promise<B.HandleRecord | null> {
    return this.#c.write(() => {
      if (this.#q.versionOf.get(user, handle)) return null;
      const row = this.#q.fromTrash.get(user, handle, ctx.now) as Row | undefined;
      if (!row) return null;
      const record = recordOf(handle, row);
      this.#q.insertRow.run(user, handle, ...recordValues(record));
      this.#q.trashDelete.run(user, handle);
      if (ctx.quota) this.#u.apply(user, ctx, { handles: 1, bytes: utf8Length(record.state) });
      this.#c.wrote(user, handle);
      return record;
    });
  }

  /** {@inheritDoc Backend.transfer} */
  readonly transfer: B.TransferPrimitives = {
    move: (user, handle, to, ctx, step = {}) => {
      return this.#c.write((): B.TransferOutcome => {
        const row = this.#q.read.get(user, handle) as Row | undefined;
        if (!row) return "absent";
        if (this.#q.versionOf.get(to, handle) || this.#q.inTrash.get(to, handle)) return "taken";
        const record = recordOf(handle, row), content = step.content;
        if (content && !this.#reseal(user, handle, record, content)) return "changed";
        // Entries of the new owner under this handle (none live, none trashed) are orphans.
        this.#q.logDrop.run(to, handle);
        this.#q.moveRecord.run(user, handle, to);
        // After the move, whose trigger counted it; a refusal rolls the transaction back.
        const bytes = utf8Length(content?.state ?? record.state);
        if (ctx.quota) this.#u.apply(to, ctx, { handles: 1, bytes });
        this.#q.moveLog.run(user, handle, to);
        this.#q.dropLease.run(user, handle);
        if (step.audit) this.#audit(to, handle, step.audit, ctx.now);
        this.#g.endOf(user, handle, ctx.now);
        if (step.keep) this.#g.insert(step.keep);
        this.#c.wrote(user, handle);
        this.#c.wrote(to, handle);
        return "moved";
      });
    },
  };

  /**
   * Writes a transfer's `content` in place of the record's (inside the
   * move's transaction); false, writing nothing, when it was made from
   * another version or lacks an entry's text. The changelog's tail goes to
   * the keyed table first, so each entry is one row to rewrite.
   */
  #reseal(user: string, handle: string, r: B.HandleRecord, content: B.TransferContent): boolean {
    if (r.version !== content.version) return false;
    const texts = new Map(content.entries.map((e) => [e.version, e.text]));
    const log = this.#q.log.read(user, handle, 0);
    if (log.some((e) => !texts.has(e.version))) return false;
    this.#q.log.flush(user, handle);
    const { record, entry } = this.#q.reseal;
    for (const e of log) entry.run(user, handle, e.version, texts.get(e.version)!);
    record.run(user, handle, content.state, content.preview ?? null);
    return true;
  }

  /** {@inheritDoc Backend.changes} */
  changes(user: string, handle: string, afterVersion: number): Promise<B.ChangeEntry[]> {
    return this.#c.read(
      user,
      handle,
      () => this.#q.log.read(user, handle, afterVersion),
    );
  }

  /** {@inheritDoc Backend.list} */
  list(user: string, q: B.ListQuery): Promise<B.HandleMeta[]> {
    return this.#c.run(() => {
      const { shape, values } = listFilters(q);
      const rows = this.#q.list(shape, q.previews).all(user, q.limit, ...values) as Row[];
      // After the metadata: `forked_from`, then (with previews) the preview.
      return rows.map((r) => {
        const c = cells(r), meta = { ...metaOf(r), ...forkedFromOf(c[7]) };
        return c[8] == null ? meta : { ...meta, preview: c[8] as string };
      });
    });
  }

  /** {@inheritDoc Backend.trash} */
  readonly trash: B.TrashPrimitives = {
    list: (user, q) => {
      return this.#c.run(() => {
        // The user's rows through the primary key, sorted: a trash is small.
        this.#trashList ??= returnArrays(this.#db.prepare(
          `SELECT ${META}, trashed_until FROM trash WHERE user = ?1 AND (?2 IS NULL OR ` +
            "trashed_until < ?2 OR (trashed_until = ?2 AND handle > ?3)) " +
            "ORDER BY trashed_until DESC, handle LIMIT ?4",
        ));
        const a = q.after;
        const rows = this.#trashList.all(user, a?.trashUntil ?? null, a?.handle ?? "", q.limit);
        return (rows as Row[]).map((r) => ({ ...metaOf(r), trashUntil: cells(r)[7] as number }));
      });
    },
    until: (user, handle) => {
      return this.#c.run(() => {
        const row = this.#q.trashedUntil.get(user, handle);
        return row ? row.trashed_until as number : null;
      });
    },
  };

  /** {@inheritDoc Backend.sweep} */
  sweep(user: string | null, expiredAtOrBefore: number, now: number): Promise<number> {
    return this.#c.run(() => {
      // Batches, each its own short transaction, so that a large backlog never
      // holds the write lock for long against another process; each batch
      // deletes its records' changelogs in the same transaction.
      const batch = (swept: Row[], drop: StatementSync, live = false) => {
        for (const r of swept) {
          const [u, h] = cells(r);
          drop.run(u as string, h as string);
          if (live) this.#c.wrote(u as string, h as string);
        }
        return swept.length;
      };
      let total = 0;
      for (;;) {
        const n = this.#c.tx(() =>
          batch(
            (user === null
              ? this.#q.sweepAll.all(expiredAtOrBefore)
              : this.#q.sweepUser.all(user, expiredAtOrBefore)) as Row[],
            this.#q.logDrop,
            true,
          )
        );
        total += n;
        if (n < SWEEP_BATCH) break;
      }
      while (
        this.#c.tx(() =>
          batch(
            (user === null
              ? this.#q.sweepTrashAll.all(now)
              : this.#q.sweepTrashUser.all(user, now)) as Row[],
            this.#q.logDropOrphan,
          )
        ) >= SWEEP_BATCH
      );
      while (this.#c.tx(() => Number(this.#q.sweepIdem.run(now).changes)) >= SWEEP_BATCH);
      while (this.#c.tx(() => Number(this.#q.sweepLeases.run(now).changes)) >= SWEEP_BATCH);
      return total;
    }).then(async (total) => {
      // Its own transactions, outside the group commit: on disk before it answers.
      if (total > 0) await this.#c.durable();
      return total;
    });
  }

  /** {@inheritDoc Backend.records} */
  readonly records: B.RecordPrimitives = {
    users: (query) => {
      return this.#c.run(() => {
        if (query.limit < 1) return [];
        // Skips from user to user through the primary key: one index seek per user.
        const rows = query.after === undefined
          ? this.#q.usersFirst.all(query.limit)
          : this.#q.usersAfter.all(query.after, query.limit);
        return rows.map((r) => r.user as string);
      });
    },
    import: (user, record, _ctx) => {
      return this.#c.write(() => {
        const current = this.#q.versionOf.get(user, record.handle);
        if (current && (current.version as number) >= record.version) return "kept";
        // Its history is unknown. A trashed copy of the handle stays in the trash
        // (restorable once no live record holds the handle), without its log.
        this.#q.log.clear(user, record.handle);
        const values = recordValues(record);
        if (current) this.#q.updateRow.run(...values, user, record.handle);
        else this.#q.insertRow.run(user, record.handle, ...values);
        this.#c.wrote(user, record.handle);
        return current ? "replaced" : "inserted";
      });
    },
  };

  /** {@inheritDoc Backend.quotas} */
  readonly quotas: B.QuotaPrimitives = {
    /**
     * One row read; when the user has no row yet, it is rebuilt from the
     * records and kept (one short write transaction).
     */
    usage: (user, now) => this.#c.write(() => this.#u.read(user, now)),
  };

  /** {@inheritDoc Backend.grants} */
  readonly grants: B.GrantPrimitives = {
    put: (grant, now, audit) => {
      return this.#c.write((): void | "absent" => {
        this.#g.checkParent(grant, now);
        if (audit && !this.#audit(grant.owner, grant.handle, audit, now)) return "absent";
        this.#g.insert(grant);
      });
    },
    read: (idOrAlias) => this.#c.run(() => this.#g.read(idOrAlias)),
    /**
     * An `unshare` that ends nothing (the grants had ended already) leaves no entry.
     */
    end: (grant, now, audit) => {
      return this.#c.write(() => {
        const ended = this.#g.end(grant, now);
        // A record deleted, trashed or moved away gets no entry (there is no row to bump).
        if (audit && ended.length > 0) this.#audit(ended[0]!.owner, ended[0]!.handle, audit, now);
        return ended;
      });
    },
    of: (owner, handle) => this.#c.run(() => this.#g.of(owner, handle)),
    to: (to) => this.#c.run(() => this.#g.to(to)),
    sweep: (before) => this.#c.write(() => this.#g.sweep(before)),
  };

  /** Takes a lease inside the running write transaction. */
  #take(user: string, handle: string, lease: B.LeaseRecord, now: number): B.LeaseOutcome {
    const taken = this.#q.leaseTake.get(user, handle, lease.holder, lease.expiresAt, now);
    // Nothing returned: another holder's lease is in force; the same transaction reads it.
    const row = taken ?? this.#q.leaseOf.get(user, handle)!;
    return { acquired: taken !== undefined, lease: leaseOf(row) };
  }

  /** A write's answer with `ctx.lease` taken in its transaction when the write `landed`. */
  #withLease<T extends object>(
    out: T,
    user: string,
    handle: string,
    landed: boolean,
    ctx: B.WriteContext,
  ): T & { lease?: B.LeaseOutcome } {
    if (!landed || !ctx.lease) return out;
    return { ...out, lease: this.#take(user, handle, ctx.lease, ctx.now) };
  }

  /** {@inheritDoc Backend.feed} */
  readonly feed: B.FeedPrimitives = {
    /**
     * Writes through this object are heard of once they commit; those of other
     * connections and processes through `PRAGMA data_version`, polled every
     * 50 ms while at least one listener exists (an in-memory database has no
     * other connection, so it is not polled).
     */
    subscribe: (user, handle, listener) => this.#c.subscribe(user, handle, listener),
  };

  /** Closes the connection when this backend owns it. Idempotent. */
  async close(): Promise<void> {
    if (!this.#c.close()) return;
    // The writes already queued still commit and sync.
    await this.#c.release();
    this.#q.clear();
    if (this.#closeDb && this.#db.isOpen) this.#db.close();
  }

  /**
   * Inside a write's transaction: applies `audit` to `(user, handle)` — its
   * next version and `updatedAt`, and the entry appended and the changelog
   * trimmed as any write's are. False, and nothing changed, when there is no
   * such record.
   */
  #audit(user: string, handle: string, audit: B.AuditStep, now: number): boolean {
    const version = this.#g.bump(user, handle, audit);
    if (version === null) return false;
    const entry = auditEntry(audit, version);
    this.#q.append(user, handle, entry, { now, graceMs: 0, retention: audit.retention });
    this.#c.wrote(user, handle);
    return true;
  }

  /**
   * Runs a write in one transaction that first looks its idempotency key up:
   * a key seen before answers the first attempt's result, and nothing is written.
   */
  #claim<T>(user: string, ctx: B.WriteContext, fn: () => T): Promise<T | B.Replayed> {
    return this.#c.write(() => this.#q.replay(user, ctx) ?? fn());
  }
}
