/**
 * The PostgreSQL backend (`postgres://…`, `postgresql://…`), for teams that
 * already run PostgreSQL and want their agents' state beside their other data,
 * with its backups, replicas and point-in-time recovery.
 *
 * Every handle is one row keyed by `(user_id, handle)`, and every primitive
 * takes its atomicity from the engine: `save` without history is one
 * conditional `UPDATE`, `update` runs in a transaction that holds the row
 * lock (`SELECT … FOR UPDATE`), mint collisions are caught by the primary key
 * (`INSERT … ON CONFLICT DO NOTHING`), and an idempotency record is written in
 * the same transaction as the write it remembers. Listing reads an index on
 * `(user_id, updated_at)` that carries every metadata column, so it never
 * reads a state.
 *
 * The changelog is a table of its own, `changes`, keyed by
 * `(user_id, handle, version)`: a mint's entry is inserted by the same
 * statement as the row, and an update's entry, with the retention trim, by
 * the statement that writes the new row inside the row-locking transaction.
 * A revoked handle stays in `handles` with `trashed_until` set, its changelog
 * beside it, until the undo window closes: every live query leaves such rows
 * out (listing through a partial index), and the primary key keeps its handle
 * from being minted again.
 *
 * Advisory leases are rows of a `leases` table beside the records, which they
 * never touch: taking one is one `INSERT … ON CONFLICT DO UPDATE … WHERE`.
 * The change feed is `LISTEN`/`NOTIFY`: every write of a record calls
 * `pg_notify` on a channel of the schema's own, in the write's statement or
 * transaction, so the event is delivered exactly when the write commits, to
 * every instance that listens.
 *
 * The backend creates and migrates its own tables — `handles`, `changes`,
 * `idempotency`, `leases` and `meta` (which holds the schema version) — in one
 * PostgreSQL schema, `mcpstate` unless told otherwise. Migrations run in a
 * transaction under `pg_advisory_xact_lock`, so any number of instances may
 * start at the same moment; stop instances of an older mcpstate before
 * starting a newer one on the same schema, as they would not know the newer
 * layout. Going from schema version 1 to 2 rebuilds the listing index, and
 * calls wait while it builds, which on a large table takes a while. Expired
 * rows, trashed rows past their undo window and their changelogs are
 * reclaimed by the store's own periodic sweep.
 *
 * URL form: `postgres://[user[:password]@]host[:port]/database[?schema=name]`.
 * `schema` (letters, digits and `_`, at most 63) picks the PostgreSQL schema;
 * every other query parameter goes to the driver (`sslmode=require`, `max=20`
 * for the pool size, `connect_timeout=5`, `prepare=false` behind a
 * transaction-mode pooler, or a server setting such as
 * `statement_timeout=10000`).
 *
 * While the server is down or restarting, calls fail with `backend_error`
 * ("PostgreSQL is unreachable or restarting …") — at once when connections
 * are refused, within the connect timeout (10 seconds unless the URL says
 * otherwise) when the host does not answer — and they succeed again as soon
 * as the server is back. A call cut off mid-way may or may not have been
 * applied, so the message tells the caller to re-read before changing the
 * handle again, or to repeat the call with the same idempotency key.
 *
 * @example From a URL
 * ```ts ignore
 * import { HandleStore } from "@mcpstate/core";
 *
 * await using store = await HandleStore.fromUrl(
 *   "postgres://app:secret@db.internal:5432/app?schema=agents&sslmode=require",
 * );
 * const handle = await store.mint("note", { text: "hi" }, { user: "alice" });
 * ```
 *
 * @example With a client you configure yourself
 * ```ts ignore
 * import postgres from "npm:postgres@3.4.9";
 * import { HandleStore } from "@mcpstate/core";
 * import { PostgresBackend } from "@mcpstate/core/postgres";
 *
 * const sql = postgres("postgres://app@db.internal/app", { max: 20 });
 * const store = new HandleStore(new PostgresBackend(sql, { schema: "agents" }));
 * // … use the store …
 * await store.close(); // leaves `sql` open: it is yours
 * await sql.end();
 * ```
 *
 * @module
 */

export type * from "./_types.ts";
export { POSTGRES_SCHEMA_VERSION } from "./postgres/_schema.ts";
export { DEFAULT_POSTGRES_SCHEMA } from "./postgres/_url.ts";
export { PostgresBackend } from "./postgres/_backend.ts";
export type { PostgresBackendOptions } from "./postgres/_options.ts";
