/**
 * The PostgreSQL backend's schema: its tables and indexes, and the
 * migrations that bring an older layout forward.
 *
 * @module
 */

import type postgres from "postgres";
import { BackendError } from "../../errors.ts";
import { hash32 } from "./_rows.ts";

/** The schema version this module creates and understands. */
export const POSTGRES_SCHEMA_VERSION = 3;

/** First half of the advisory lock key that serialises migrations ("mcps"). */
const LOCK_CLASS = 0x6d637073;

/**
 * Creates the schema and its tables when absent and brings an older layout
 * up to {@link POSTGRES_SCHEMA_VERSION}, under a transaction-scoped advisory
 * lock, so that instances starting together wait for each other.
 *
 * @param tx An open transaction.
 * @param schema The PostgreSQL schema.
 * @throws {BackendError} when the database is not UTF-8 or the schema was
 *   written by a newer version of mcpstate.
 */
export async function migrate(tx: postgres.ISql, schema: string): Promise<void> {
  const s = `"${schema}"`;
  await tx.unsafe("SELECT pg_advisory_xact_lock($1::int, $2::int)", [
    LOCK_CLASS,
    hash32(schema),
  ]);
  const [info] = await tx.unsafe(
    `SELECT current_setting('server_encoding'),
            EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1::text),
            to_regclass($2::text) IS NOT NULL`,
    [schema, `${s}.meta`],
  ).values();
  const [encoding, hasSchema, hasMeta] = info ?? [];
  if (encoding !== "UTF8" && encoding !== "SQL_ASCII") {
    throw new BackendError(
      `The database's encoding is ${
        String(encoding)
      }; mcpstate needs UTF8 to keep every JSON string exactly. Use a database created with ENCODING 'UTF8'.`,
    );
  }
  // Existence is checked first so that a role without CREATE on the
  // database can use a schema a DBA created for it.
  if (!hasSchema) await tx.unsafe(`CREATE SCHEMA ${s}`);
  if (!hasMeta) {
    await tx.unsafe(`CREATE TABLE ${s}.meta (key text PRIMARY KEY, value text NOT NULL)`);
  }
  const [row] = await tx.unsafe(
    `SELECT value FROM ${s}.meta WHERE key = 'schema_version'`,
  ).values();
  const current = row ? Number(row[0]) : 0;
  if (!Number.isSafeInteger(current) || current > POSTGRES_SCHEMA_VERSION) {
    throw new BackendError(
      `The PostgreSQL schema "${schema}" is at version ${
        String(row?.[0])
      }, newer than this mcpstate understands (${POSTGRES_SCHEMA_VERSION}). Upgrade mcpstate, or point it at another schema with ?schema=.`,
    );
  }
  for (let v = current; v < POSTGRES_SCHEMA_VERSION; v++) {
    for (const statement of MIGRATIONS[v]!(s)) await tx.unsafe(statement);
  }
  // The schema version of a typed kind's record: a nullable column added in
  // place (nothing rewritten), apart from the numbered migrations above.
  await addColumn(tx, s, "schema_version", "bigint");
  // A record's preview (a line describing its state), the same way; `NULL`
  // for a record written before previews existed.
  await addColumn(tx, s, "preview", "text");
  // A fork's lineage (`{"handle":…,"version":…}` as text), likewise.
  await addColumn(tx, s, "forked_from", "text");
  // The handle of a kept idempotency result (the record it holds, sealed for
  // that handle under encryption at rest); `NULL` for a removal's result or
  // a row written before the column existed.
  await addColumn(tx, s, "handle", "text", "idempotency");
  if (current < POSTGRES_SCHEMA_VERSION) {
    await tx.unsafe(
      `INSERT INTO ${s}.meta (key, value) VALUES ('schema_version', $1::text)
       ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value`,
      [String(POSTGRES_SCHEMA_VERSION)],
    );
  }
}

/**
 * Schema migrations: entry `v` takes the schema from version `v` to `v + 1`.
 * `user_id` and `handle` use the "C" collation, so that `handle` orders by
 * code unit (the listing order of every backend) and compares fast.
 */
const MIGRATIONS: readonly ((s: string) => string[])[] = [
  (s) => [
    `CREATE TABLE ${s}.handles (
       user_id     text COLLATE "C" NOT NULL,
       handle      text COLLATE "C" NOT NULL,
       kind        text NOT NULL,
       state       text NOT NULL,
       version     bigint NOT NULL,
       created_at  bigint NOT NULL,
       updated_at  bigint NOT NULL,
       expires_at  bigint,
       last_writer text,
       PRIMARY KEY (user_id, handle)
     )`,
    // Listing is an index-only scan of this index: it never touches a state.
    `CREATE INDEX handles_user_updated ON ${s}.handles (user_id, updated_at DESC, handle)
       INCLUDE (kind, version, created_at, expires_at, last_writer)`,
    `CREATE INDEX handles_expires ON ${s}.handles (expires_at) WHERE expires_at IS NOT NULL`,
    `CREATE TABLE ${s}.idempotency (
       user_id     text COLLATE "C" NOT NULL,
       scope       text COLLATE "C" NOT NULL,
       key         text COLLATE "C" NOT NULL,
       fingerprint text NOT NULL,
       result      text,
       expires_at  bigint NOT NULL,
       PRIMARY KEY (user_id, scope, key)
     )`,
    `CREATE INDEX idempotency_expires ON ${s}.idempotency (expires_at)`,
  ],
  // 2: the changelog and the trash. Adding a nullable column rewrites nothing;
  // the listing index is rebuilt as a partial index of the live rows, so that
  // listing stays an index-only scan that never sees a trashed row.
  (s) => [
    `ALTER TABLE ${s}.handles ADD COLUMN trashed_until bigint`,
    `DROP INDEX ${s}.handles_user_updated`,
    `CREATE INDEX handles_user_updated ON ${s}.handles (user_id, updated_at DESC, handle)
       INCLUDE (kind, version, created_at, expires_at, last_writer)
       WHERE trashed_until IS NULL`,
    `CREATE INDEX handles_trashed ON ${s}.handles (trashed_until)
       WHERE trashed_until IS NOT NULL`,
    `CREATE TABLE ${s}.changes (
       user_id text COLLATE "C" NOT NULL,
       handle  text COLLATE "C" NOT NULL,
       version bigint NOT NULL,
       at      bigint NOT NULL,
       text    text NOT NULL,
       PRIMARY KEY (user_id, handle, version)
     )`,
  ],
  // 3: advisory leases, beside the records.
  (s) => [
    `CREATE TABLE ${s}.leases (
       user_id    text COLLATE "C" NOT NULL,
       handle     text COLLATE "C" NOT NULL,
       holder     text NOT NULL,
       expires_at bigint NOT NULL,
       PRIMARY KEY (user_id, handle)
     )`,
    `CREATE INDEX leases_expires ON ${s}.leases (expires_at)`,
  ],
];

/**
 * Adds a nullable column to `<s>.<table>` in place (nothing rewritten) when
 * it is not there yet.
 */
async function addColumn(
  tx: postgres.ISql,
  s: string,
  name: "schema_version" | "preview" | "forked_from" | "handle",
  type: "bigint" | "text",
  table: "handles" | "idempotency" = "handles",
): Promise<void> {
  const [has] = await tx.unsafe(
    `SELECT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = $1::text::regclass
       AND attname = '${name}' AND NOT attisdropped)`,
    [`${s}.${table}`],
  ).values();
  if (!has?.[0]) await tx.unsafe(`ALTER TABLE ${s}.${table} ADD COLUMN ${name} ${type}`);
}
