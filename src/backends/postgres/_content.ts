/**
 * Every stored copy of state content on PostgreSQL (SPEC 9.2, `mcpstate
 * encrypt`), scanned table by table in primary-key order and rewritten in
 * place: records live, expired and trashed (`handles`), the changelog
 * (`changes`), and the results kept for idempotency keys. Each rewrite is
 * one `UPDATE` that matches the texts read, so a write since wins; the
 * usage trigger follows the state's new size.
 *
 * @module
 */

import type * as B from "../../backend.ts";
import type { Pool } from "./_pool.ts";

/** The tables in scan order: their primary keys and their content columns. */
const TABLES = [
  ["handles", ["user_id", "handle"], "state, preview, trashed_until IS NOT NULL"],
  ["changes", ["user_id", "handle", "version"], "text"],
  ["idempotency", ["user_id", "scope", "key"], "result"],
] as const;

/** Where a copy is: the table's index in {@link TABLES} and the row's primary key. */
type Ref = [number, string, string, string?];

/** The statements of schema `s` (quoted). */
function statements(s: string) {
  return TABLES.map(([t, pk, columns]) => {
    const key = pk.join(", ");
    const params = pk.map((c, i) => `$${i + 1}::${c === "version" ? "bigint" : "text"}`);
    const select = `SELECT ${key}, ${columns} FROM ${s}.${t}`;
    const where = pk.map((c, i) => `${c} = ${params[i]}`).join(" AND ");
    return {
      first: `${select} ORDER BY ${key} LIMIT $1::bigint`,
      page: `${select} WHERE (${key}) > (${params.join(", ")}) ORDER BY ${key} ` +
        `LIMIT $${pk.length + 1}::bigint`,
      get: `${select} WHERE ${where}`,
      set: t === "handles"
        ? `UPDATE ${s}.${t} SET state = $3::text, preview = $4::text WHERE ${where} ` +
          "AND state = $5::text AND preview IS NOT DISTINCT FROM $6::text"
        : `UPDATE ${s}.${t} SET ${columns} = $${pk.length + 1}::text WHERE ${where} ` +
          `AND ${columns} = $${pk.length + 2}::text`,
    };
  });
}

/** The copy a row of table `i` holds, if any. */
function copyOf(i: number, row: readonly unknown[]): B.StoredContent | null {
  const user = String(row[0]);
  if (i === 0) {
    const handle = String(row[1]);
    const texts = row[3] == null ? [String(row[2])] : [String(row[2]), String(row[3])];
    return { kind: row[4] ? "trash" : "record", user, handle, texts, ref: [0, user, handle] };
  }
  if (i === 1) {
    const handle = String(row[1]), version = String(row[2]);
    return {
      kind: "entry",
      user,
      handle,
      texts: [String(row[3])],
      ref: [1, user, handle, version],
    };
  }
  if (row[3] == null) return null;
  const r = JSON.parse(String(row[3])) as B.HandleRecord | null;
  if (!r) return null;
  const texts = r.preview === undefined ? [r.state] : [r.state, r.preview];
  const ref: Ref = [2, user, String(row[1]), String(row[2])];
  return { kind: "result", user, handle: r.handle, texts, ref };
}

/**
 * The content primitives of a PostgreSQL backend.
 *
 * @param pool The backend's pool.
 * @param s The quoted schema name.
 * @param forget Drops what the backend guessed of a record (it is rewritten).
 * @returns The primitives.
 */
export function postgresContent(
  pool: Pool,
  s: string,
  forget: (user: string, handle: string) => void,
): B.ContentPrimitives {
  const q = statements(s);
  const find = async (ref: Ref) => {
    const [i, ...key] = ref;
    const [row] = await pool.read((sql) => sql.unsafe(q[i]!.get, key as string[]).values());
    return row ? copyOf(i, row) : null;
  };
  return {
    scan: ({ after, limit }) =>
      pool.read(async (sql) => {
        let [i, ...key] = after === undefined ? [0] : JSON.parse(after) as [number, ...string[]];
        const items: B.StoredContent[] = [];
        while (i < TABLES.length) {
          const rows = key.length === 0
            ? await sql.unsafe(q[i]!.first, [limit]).values()
            : await sql.unsafe(q[i]!.page, [...key, limit]).values();
          for (const row of rows) {
            const copy = copyOf(i, row);
            if (copy) items.push(copy);
          }
          if (rows.length === limit) {
            const last = rows[rows.length - 1]!;
            const pk = TABLES[i]![1].map((_, n) => String(last[n]));
            return { items, next: JSON.stringify([i, ...pk]) };
          }
          i++;
          key = [];
          if (items.length >= limit) return { items, next: JSON.stringify([i]) };
        }
        return { items, next: null };
      }),
    replace: async (item, texts) => {
      const [i, ...key] = item.ref as Ref;
      let params: unknown[];
      if (i === 0) {
        forget(item.user, item.handle);
        params = [...key, texts[0], texts[1] ?? null, item.texts[0], item.texts[1] ?? null];
      } else if (i === 1) params = [...key, texts[0], item.texts[0]];
      else {
        const cell = await pool.read((sql) => sql.unsafe(q[2]!.get, key as string[]).values());
        const raw = cell[0]?.[3];
        const r = raw == null ? null : JSON.parse(String(raw)) as B.HandleRecord | null;
        if (!r || r.state !== item.texts[0] || (r.preview ?? null) !== (item.texts[1] ?? null)) {
          return { replaced: false, current: await find(item.ref as Ref) };
        }
        const next = { ...r, state: texts[0]! };
        if (texts[1] !== undefined) next.preview = texts[1];
        params = [...key, JSON.stringify(next), String(raw)];
      }
      const res = await pool.op((sql) => sql.unsafe(q[i]!.set, params as string[]));
      if (res.count === 1) return { replaced: true, current: null };
      return { replaced: false, current: await find(item.ref as Ref) };
    },
  };
}
