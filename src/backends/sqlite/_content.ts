/**
 * Every stored copy of state content on SQLite (SPEC 9.2, `mcpstate
 * encrypt`), scanned table by table in primary-key order and rewritten in
 * place: records (`handles`, with the changelog entries their row keeps in
 * `log_tail`), the keyed changelog (`changes`, entries a read no longer
 * returns included), the trash, and the results kept for idempotency keys.
 *
 * A rewrite is one statement, or one transaction of the write queue, that
 * matches the texts read (so a write since wins); the `handles` triggers
 * keep the usage right. Records come before the keyed changelog in the
 * scan: entries move from a row's tail to `changes`, never back, so an
 * entry that moves while the scan runs is still reached.
 *
 * @module
 */

import type { DatabaseSync, StatementSync } from "node:sqlite";
import type * as B from "../../backend.ts";
import type { Connection } from "./_connection.ts";
import { parseTail, tailText } from "./_log.ts";

/** The tables in scan order, and the columns of their primary keys. */
const TABLES = [
  ["handles", ["user", "handle"]],
  ["changes", ["user", "handle", "version"]],
  ["trash", ["user", "handle"]],
  ["idempotency", ["user", "scope", "key"]],
] as const;

type Table = (typeof TABLES)[number][0];

/** Where a copy is: its table (`tail`: an entry in a row's `log_tail`) and key. */
type Ref = [Table | "tail", string, string, string | number];

/** The statements of one connection, prepared on first use. */
class ContentStatements {
  readonly page: Record<Table, StatementSync>;
  readonly first: Record<Table, StatementSync>;
  readonly get: Record<Table, StatementSync>;
  readonly setRecord: Record<"handles" | "trash", StatementSync>;
  readonly setEntry: StatementSync;
  readonly setTail: StatementSync;
  readonly setResult: StatementSync;

  constructor(db: DatabaseSync) {
    const cols: Record<Table, string> = {
      handles: "state, preview, log_tail",
      changes: "text",
      trash: "state, preview",
      idempotency: "result",
    };
    const rec = {} as Record<Table, StatementSync>;
    const page = { ...rec }, first = { ...rec }, get = { ...rec };
    for (const [t, pk] of TABLES) {
      const key = pk.join(", "), params = pk.map(() => "?").join(", ");
      const select = `SELECT ${key}, ${cols[t]} FROM ${t}`;
      page[t] = db.prepare(`${select} WHERE (${key}) > (${params}) ORDER BY ${key} LIMIT ?`);
      first[t] = db.prepare(`${select} ORDER BY ${key} LIMIT ?`);
      get[t] = db.prepare(`${select} WHERE ${pk.map((c) => `${c} = ?`).join(" AND ")}`);
    }
    this.page = page;
    this.first = first;
    this.get = get;
    const setRecord = (t: string) =>
      db.prepare(
        `UPDATE ${t} SET state = ?, preview = ? WHERE user = ? AND handle = ? ` +
          "AND state = ? AND preview IS ?",
      );
    this.setRecord = { handles: setRecord("handles"), trash: setRecord("trash") };
    this.setEntry = db.prepare(
      "UPDATE changes SET text = ? WHERE user = ? AND handle = ? AND version = ? AND text = ?",
    );
    this.setTail = db.prepare(
      "UPDATE handles SET log_tail = ? WHERE user = ? AND handle = ? AND log_tail = ?",
    );
    this.setResult = db.prepare(
      "UPDATE idempotency SET result = ? WHERE user = ? AND scope = ? AND key = ? AND result = ?",
    );
  }
}

/** The texts of a record row: its state, and its preview when it has one. */
function recordTexts(row: Record<string, unknown>): string[] {
  return row.preview == null ? [row.state as string] : [row.state as string, row.preview as string];
}

/** The copies one row holds (a `handles` row: its record, and the entries of its tail). */
function copiesOf(t: Table, row: Record<string, unknown>): B.StoredContent[] {
  const user = row.user as string;
  if (t === "idempotency") {
    if (typeof row.result !== "string") return [];
    const r = JSON.parse(row.result) as B.HandleRecord | null;
    if (!r) return [];
    const ref: Ref = [t, user, row.scope as string, row.key as string];
    const texts = r.preview === undefined ? [r.state] : [r.state, r.preview];
    return [{ kind: "result", user, handle: r.handle, texts, ref }];
  }
  const handle = row.handle as string;
  if (t === "changes") {
    const ref: Ref = [t, user, handle, row.version as number];
    return [{ kind: "entry", user, handle, texts: [row.text as string], ref }];
  }
  const out: B.StoredContent[] = [{
    kind: t === "trash" ? "trash" : "record",
    user,
    handle,
    texts: recordTexts(row),
    ref: [t, user, handle, ""] satisfies Ref,
  }];
  if (typeof row.log_tail === "string") {
    for (const e of parseTail(row.log_tail).entries) {
      const ref: Ref = ["tail", user, handle, e.version];
      out.push({ kind: "entry", user, handle, texts: [e.text], ref });
    }
  }
  return out;
}

/** The copy `ref` names, as it is now; `null` when gone. */
function find(s: ContentStatements, ref: Ref): B.StoredContent | null {
  const [t, user, a, b] = ref;
  if (t === "tail") {
    const row = s.get.handles.get(user, a);
    return (row && copiesOf("handles", row).find((c) => (c.ref as Ref)[3] === b)) ?? null;
  }
  const key = t === "handles" || t === "trash" ? [user, a] : [user, a, b];
  const row = s.get[t].get(...key);
  return (row && copiesOf(t, row)[0]) ?? null;
}

/** Writes `texts` in place of `item` when it is still as read; whether it did. */
function put(s: ContentStatements, item: B.StoredContent, texts: string[]): boolean {
  const [t, user, a, b] = item.ref as Ref;
  const [was, wasPreview = null] = item.texts as [string, string?];
  if (t === "handles" || t === "trash") {
    return Number(
      s.setRecord[t].run(texts[0]!, texts[1] ?? null, user, a, was, wasPreview).changes,
    ) === 1;
  }
  if (t === "changes") return Number(s.setEntry.run(texts[0]!, user, a, b, was).changes) === 1;
  if (t === "tail") {
    const cell = s.get.handles.get(user, a)?.log_tail;
    if (typeof cell !== "string") return false;
    const tail = parseTail(cell);
    const e = tail.entries.find((e) => e.version === b);
    if (!e || e.text !== was) return false;
    e.text = texts[0]!;
    return Number(s.setTail.run(tailText(tail), user, a, cell).changes) === 1;
  }
  const cell = s.get.idempotency.get(user, a, b)?.result;
  if (typeof cell !== "string") return false;
  const r = JSON.parse(cell) as B.HandleRecord | null;
  if (!r || r.state !== was || (r.preview ?? null) !== wasPreview) return false;
  const next = { ...r, state: texts[0]! };
  if (texts[1] !== undefined) next.preview = texts[1];
  return Number(s.setResult.run(JSON.stringify(next), user, a, b, cell).changes) === 1;
}

/** A page cursor: the table, and the primary key of the last row read in it. */
type Cursor = [number, ...(string | number)[]];

/**
 * The content primitives of a SQLite backend.
 *
 * @param open The backend's connection and write queue (read at each call:
 *   the backend makes them after its fields).
 * @returns The primitives.
 */
export function sqliteContent(
  open: () => { db: DatabaseSync; c: Connection },
): B.ContentPrimitives {
  let q: ContentStatements | undefined;
  const statements = () => {
    const { db, c } = open();
    return { s: q ??= new ContentStatements(db), c };
  };
  return {
    scan: ({ after, limit }) => {
      const { s, c } = statements();
      return c.run(() => {
        let [i, ...key] = after === undefined ? [0] as Cursor : JSON.parse(after) as Cursor;
        const items: B.StoredContent[] = [];
        while (i < TABLES.length) {
          const [t, pk] = TABLES[i]!;
          const rows = key.length === 0 ? s.first[t].all(limit) : s.page[t].all(...key, limit);
          for (const row of rows) items.push(...copiesOf(t, row));
          if (rows.length === limit) {
            const last = rows[rows.length - 1]!;
            return { items, next: JSON.stringify([i, ...pk.map((col) => last[col])]) };
          }
          i++;
          key = [];
          if (items.length >= limit) return { items, next: JSON.stringify([i]) };
        }
        return { items, next: null };
      });
    },
    replace: (item, texts) => {
      const { s, c } = statements();
      return c.write(() =>
        put(s, item, texts)
          ? { replaced: true, current: null }
          : { replaced: false, current: find(s, item.ref as Ref) }
      );
    },
  };
}
