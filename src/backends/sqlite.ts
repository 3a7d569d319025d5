/**
 * The SQLite backend (`sqlite:///…`), through the `node:sqlite` module built
 * into Deno: no FFI, no download, so a compiled binary stays dependency-free.
 *
 * - Each primitive runs one `BEGIN IMMEDIATE` transaction, synchronously:
 *   it is atomic within the process and across processes, and a second
 *   process on the same file waits (busy timeout) instead of failing.
 * - WAL journal; `synchronous=FULL` by default, so an acknowledged write
 *   survives `kill -9` and power loss. `?synchronous=normal` survives
 *   `kill -9` but may lose the last commits on power loss, for a higher
 *   write rate.
 * - Listing reads covering indexes only: it never touches a state.
 * - The changelog lives in a `changes` table keyed by
 *   `(user, handle, version)`; the newest entries of a small record stay in
 *   its own row until they fill it, then move to the table together (see
 *   `sqlite/_log.ts`). An entry is written, and the handle's log trimmed to
 *   the retention, in the same transaction as its write.
 * - A revoked handle moves to a `trash` table, so every live query (read,
 *   save, list, sweep) reads `handles` exactly as before; its changelog
 *   stays where it is and comes back with it.
 * - Advisory leases live in a `leases` table beside the records, which they
 *   never touch; taking one is one upsert in a `BEGIN IMMEDIATE` transaction.
 * - Change feed: listeners hear of this object's own commits at once, and of
 *   other connections' and processes' commits through `PRAGMA data_version`,
 *   polled every 50 ms while anyone listens.
 * - A database written by the Python mcpstate 0.2 (times in REAL epoch
 *   seconds) is migrated in place to millisecond columns the first time it
 *   is opened; one written by mcpstate 0.3 before history gains the
 *   changelog and trash tables the same way, and every older one the
 *   leases table.
 *
 * @example Open through a URL
 * ```ts
 * import { HandleStore } from "@mcpstate/core";
 * import { SqliteBackend } from "@mcpstate/core/sqlite";
 * // Files: "sqlite:///~/.mcpstate/state.db" (the default), "sqlite:////abs/path.db?synchronous=normal".
 * const backend = await SqliteBackend.fromUrl("sqlite:///:memory:");
 * await using store = new HandleStore(backend);
 * const handle = await store.mint("note", { text: "hi" }, { user: "alice" });
 * ```
 *
 * @example Bring your own connection
 * ```ts
 * import { DatabaseSync } from "node:sqlite";
 * import { HandleStore } from "@mcpstate/core";
 * import { SqliteBackend } from "@mcpstate/core/sqlite";
 * const db = new DatabaseSync(":memory:");
 * const store = new HandleStore(new SqliteBackend(db));
 * await store.mint("note", { text: "hi" }, { user: "alice" });
 * await store.close();
 * db.close(); // an injected connection stays the caller's to close
 * ```
 *
 * @module
 */

export type * from "./_types.ts";
export { SQLITE_SCHEMA_VERSION } from "./sqlite/_schema.ts";
export type { SqliteSynchronous } from "./sqlite/_url.ts";
export { SqliteBackend, type SqliteBackendOptions } from "./sqlite/_backend.ts";
