/**
 * Erasing a user on SQLite (SPEC 9.1): one `BEGIN IMMEDIATE` transaction
 * (the connection's write queue) deletes the user's rows from every table
 * and the grants on, to and by the user with the re-shares under them.
 * SQLite runs one writer at a time across connections and processes, so a
 * write of the user committed before it (and is erased) or runs after it
 * (and finds nothing to change).
 *
 * @module
 */

import type { DatabaseSync, StatementSync } from "node:sqlite";
import type * as B from "../../backend.ts";
import { goneGrants } from "../_erase_sql.ts";
import type { Connection } from "./_connection.ts";

/**
 * Every table of the schema, and the column naming the user whose row it
 * is (`null`: the grants table, whose rows {@link goneGrants} picks). A test
 * compares it with the file's tables, so a table added to the schema fails
 * until erasing knows it.
 */
export const ERASED_TABLES: Readonly<Record<string, string | null>> = {
  handles: "user",
  trash: "user",
  changes: "user",
  idempotency: "user",
  leases: "user",
  usage: "user",
  // Its wrapped data key (encryption at rest): gone with the data it opened.
  data_keys: "user",
  grants: null,
};

/** The statements of one connection, prepared on first use. */
class EraseStatements {
  readonly countHandles: StatementSync;
  readonly countGrants: StatementSync;
  readonly dropGrants: StatementSync;
  readonly dropRecords: StatementSync[];
  readonly dropRest: StatementSync[];

  constructor(db: DatabaseSync) {
    const gone = goneGrants("grants", (n) => `?${n}`);
    this.countHandles = db.prepare(
      "SELECT (SELECT count(*) FROM handles WHERE user = ?1) + " +
        "(SELECT count(*) FROM trash WHERE user = ?1) AS n",
    );
    this.countGrants = db.prepare(`${gone} SELECT count(*) AS n FROM gone`);
    this.dropGrants = db.prepare(
      `${gone} DELETE FROM grants WHERE grant_id IN (SELECT id FROM gone)`,
    );
    // The records (live and expired, then trashed), naming their handles.
    this.dropRecords = ["handles", "trash"].map((t) =>
      db.prepare(`DELETE FROM ${t} WHERE user = ? RETURNING handle`)
    );
    // After the records: the `handles` triggers update the usage row first.
    this.dropRest = Object.entries(ERASED_TABLES)
      .filter(([t, column]) => column !== null && t !== "handles" && t !== "trash")
      .map(([t, column]) => db.prepare(`DELETE FROM ${t} WHERE ${column} = ?`));
  }
}

/**
 * The erasure primitives of a SQLite backend.
 *
 * @param open The backend's connection and write queue (read at each call:
 *   the backend makes them after its fields).
 * @returns The primitives.
 */
export function sqliteErasure(
  open: () => { db: DatabaseSync; c: Connection },
): B.ErasurePrimitives {
  let q: EraseStatements | undefined;
  const statements = (db: DatabaseSync) => (q ??= new EraseStatements(db));
  const counts = (s: EraseStatements, user: string): B.ErasureCounts => ({
    handles: Number(s.countHandles.get(user)!.n),
    grants: Number(s.countGrants.get(user)!.n),
  });
  return {
    count: (user) => {
      const { db, c } = open();
      return c.run(() => counts(statements(db), user));
    },
    erase: (user) => {
      const { db, c } = open();
      return c.write((): B.ErasureCounts => {
        const s = statements(db);
        const grants = Number(s.dropGrants.run(user).changes);
        const handles: string[] = [];
        for (const drop of s.dropRecords) {
          for (const row of drop.all(user)) handles.push(row.handle as string);
        }
        for (const drop of s.dropRest) drop.run(user);
        for (const h of new Set(handles)) c.wrote(user, h);
        return { handles: handles.length, grants };
      });
    },
  };
}
