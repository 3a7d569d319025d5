/**
 * The SQLite backend's changelog: a `changes` table keyed by
 * `(user, handle, version)`, and the newest entries of a small record kept
 * in its own row (the `log_tail` column of `handles`), so that a write of a
 * small state appends its entry to the page it rewrites anyway.
 *
 * Why: an entry inserted into the keyed table lands in the middle of a
 * B-tree whose leaves are nearly full; SQLite then rewrites the leaf, and
 * every few inserts splits it, rewriting three siblings and their parent.
 * That was half of the WAL frames of a 1 KiB save. Entries kept in the row
 * cost no page of their own; they move to the keyed table together, a few
 * at a time (one leaf, usually), when the row would outgrow its page
 * ({@link TAIL_ROW_MAX}) or holds {@link TAIL_MAX_ENTRIES} of them.
 *
 * The tail is a JSON array: `[floorVersion, floorAt, version, at, text,
 * version, at, text, …]`, entries oldest first. The floor is the retention
 * of the appends since the entries last moved: entries of the keyed table at
 * or below `floorVersion`, or older than `floorAt`, are the ones those
 * appends deleted, and no read returns them; they are deleted from the
 * table when the tail next moves there. Entries in the tail are trimmed at
 * once. A read answers exactly what deleting them at each append would.
 *
 * @module
 */

import type { DatabaseSync, StatementSync } from "node:sqlite";
import type { ChangeEntry, Retention } from "../../backend.ts";
import { utf8Length } from "../../json.ts";
import { ByteCappedCache } from "../_cache.ts";
import { cells, entryOf, returnArrays, type Row } from "./_rows.ts";

/**
 * A row whose state and tail would be over this many UTF-8 bytes keeps no
 * tail: its entries go to the keyed table. Below a 4 KiB page's largest
 * local payload (4,061 bytes), with room for the other columns, so that the
 * tail never pushes a row onto an overflow page.
 */
export const TAIL_ROW_MAX = 3_000;

/** At most this many entries in a tail. */
export const TAIL_MAX_ENTRIES = 32;

/**
 * The UTF-8 bytes of `state`, when its row may keep a tail beside it;
 * `undefined` for a state too large (its UTF-16 length alone is a lower
 * bound, so a large state is never encoded just to be measured).
 */
export function tailRoom(state: string): number | undefined {
  return state.length < TAIL_ROW_MAX ? utf8Length(state) : undefined;
}

/** A parsed tail: its floor and its entries, oldest first. */
export interface Tail {
  floorVersion: number | null;
  floorAt: number | null;
  entries: ChangeEntry[];
}

/** A `log_tail` cell, parsed (the format is in the module doc). */
export function parseTail(text: string): Tail {
  const a = JSON.parse(text) as (number | string | null)[];
  const entries: ChangeEntry[] = [];
  for (let i = 2; i + 2 < a.length; i += 3) {
    entries.push({ version: a[i] as number, at: a[i + 1] as number, text: a[i + 2] as string });
  }
  return { floorVersion: a[0] as number | null, floorAt: a[1] as number | null, entries };
}

/** The `log_tail` cell of a tail. */
export function tailText(t: Tail): string {
  const a: (number | string | null)[] = [t.floorVersion, t.floorAt];
  for (const e of t.entries) a.push(e.version, e.at, e.text);
  return JSON.stringify(a);
}

const max = (a: number | null, b: number) => a === null || b > a ? b : a;

/**
 * What a tail this connection computed holds, so that the next append to
 * the same tail need not parse it: kept only while the row's `log_tail` is
 * still exactly {@link TailInfo.text} (compared on each use, so another
 * writer's change, or a rolled-back write, only costs the parse).
 */
interface TailInfo {
  /** The tail's text. */
  text: string;
  floorVersion: number | null;
  floorAt: number | null;
  /** Where its entries start in {@link TailInfo.text} (after the floor). */
  head: number;
  /** Its UTF-8 length. */
  bytes: number;
  /** How many entries it holds, and their lowest and highest version and earliest time. */
  count: number;
  minVersion: number;
  maxVersion: number;
  minAt: number;
}

/** The key of `(user, handle)` among the tails: the user's length first, so that no two meet. */
function tailKey(user: string, handle: string): string {
  return `${user.length}:${user}${handle}`;
}

/** A tail's floor as its text starts (`JSON.stringify` of the two numbers). */
function floorText(floorVersion: number | null, floorAt: number | null): string {
  return `[${JSON.stringify(floorVersion)},${JSON.stringify(floorAt)}`;
}

/** The tail {@link tailText} writes for `t`, with what {@link TailInfo} keeps of it. */
function infoOf(t: Tail): TailInfo {
  const text = tailText(t);
  let minVersion = Infinity, maxVersion = -Infinity, minAt = Infinity;
  for (const e of t.entries) {
    if (e.version < minVersion) minVersion = e.version;
    if (e.version > maxVersion) maxVersion = e.version;
    if (e.at < minAt) minAt = e.at;
  }
  return {
    text,
    floorVersion: t.floorVersion,
    floorAt: t.floorAt,
    head: floorText(t.floorVersion, t.floorAt).length,
    bytes: utf8Length(text),
    count: t.entries.length,
    minVersion,
    maxVersion,
    minAt,
  };
}

/** The changelog statements of one connection. */
export class ChangeLog {
  /** The tails this connection last computed, by user and handle (see {@link TailInfo}). */
  readonly #tails = new ByteCappedCache<TailInfo>(TAIL_ROW_MAX, 4_194_304, (t) => t.text.length);
  readonly #put: StatementSync;
  readonly #trim: StatementSync;
  readonly #drop: StatementSync;
  readonly #read: StatementSync;
  readonly #tailGet: StatementSync;
  readonly #tailSet: StatementSync;
  readonly #tailClear: StatementSync;

  /** Prepares the statements on `db`, whose schema is ready. */
  constructor(db: DatabaseSync) {
    const p = (sql: string) => db.prepare(sql);
    this.#put = p(
      "INSERT OR REPLACE INTO changes (user, handle, version, at, text) VALUES (?, ?, ?, ?, ?)",
    );
    this.#trim = p(
      "DELETE FROM changes WHERE user = ? AND handle = ? AND (version <= ? OR at < ?)",
    );
    this.#drop = p("DELETE FROM changes WHERE user = ? AND handle = ?");
    // One statement, so that the live check, the tail and the keyed entries
    // come from one snapshot (another process may move a tail in between).
    this.#read = returnArrays(p(
      "SELECT version, at, text FROM changes WHERE user = ?1 AND handle = ?2 AND version > ?3 " +
        "AND EXISTS (SELECT 1 FROM handles WHERE user = ?1 AND handle = ?2) " +
        "UNION ALL SELECT -1, 0, log_tail FROM handles " +
        "WHERE user = ?1 AND handle = ?2 AND log_tail IS NOT NULL ORDER BY 1",
    ));
    this.#tailGet = p("SELECT log_tail FROM handles WHERE user = ? AND handle = ?");
    this.#tailSet = p("UPDATE handles SET log_tail = ? WHERE user = ? AND handle = ?");
    // Only a row that holds a tail is rewritten: a large record's row costs
    // its overflow pages each time it is.
    this.#tailClear = p(
      "UPDATE handles SET log_tail = NULL WHERE user = ? AND handle = ? AND log_tail IS NOT NULL",
    );
  }

  /**
   * The entries after `afterVersion`, oldest first; none when the record is
   * not live.
   */
  read(user: string, handle: string, afterVersion: number): ChangeEntry[] {
    const rows = this.#read.all(user, handle, afterVersion) as Row[];
    if (rows.length === 0) return [];
    const first = cells(rows[0]!);
    if (first[0] !== -1) return rows.map(entryOf);
    const tail = parseTail(first[2] as string);
    const fv = tail.floorVersion ?? -Infinity, fa = tail.floorAt ?? -Infinity;
    const byVersion = new Map<number, ChangeEntry>();
    for (let i = 1; i < rows.length; i++) {
      const e = entryOf(rows[i]!);
      if (e.version > fv && e.at >= fa) byVersion.set(e.version, e);
    }
    // An entry in the tail takes the place of a keyed one of its version.
    for (const e of tail.entries) if (e.version > afterVersion) byVersion.set(e.version, e);
    return [...byVersion.values()].sort((a, b) => a.version - b.version);
  }

  /**
   * The tail a new record starts with: its first entry, or `null` when the
   * row would outgrow {@link TAIL_ROW_MAX} (the entry then goes to the keyed
   * table, see {@link ChangeLog.start}).
   *
   * @param stateBytes UTF-8 bytes of the record's state (see {@link tailRoom}).
   */
  firstTail(
    user: string,
    handle: string,
    entry: ChangeEntry,
    stateBytes: number | undefined,
  ): string | null {
    if (stateBytes === undefined || stateBytes >= TAIL_ROW_MAX) return null;
    const info = infoOf({ floorVersion: null, floorAt: null, entries: [entry] });
    if (stateBytes + info.bytes > TAIL_ROW_MAX) return null;
    return this.#keep(info, tailKey(user, handle));
  }

  /**
   * Starts the log of a record just inserted with `tail` (from
   * {@link ChangeLog.firstTail}): drops what the keyed table holds under
   * its name, and keeps `entry` there when the row holds no tail.
   */
  start(user: string, handle: string, entry: ChangeEntry, tail: string | null): void {
    this.#drop.run(user, handle);
    if (tail === null) this.#put.run(user, handle, entry.version, entry.at, entry.text);
  }

  /**
   * Appends `entry` to the handle's log, first dropping what the retention
   * no longer keeps.
   *
   * @param stateBytes UTF-8 bytes of the record's state after the write,
   * when the caller knows them; otherwise the entry goes to the keyed table
   * (after the tail, if any).
   */
  append(
    user: string,
    handle: string,
    entry: ChangeEntry,
    retention: Retention | undefined,
    now: number,
    stateBytes?: number,
  ): void {
    const row = this.#tailGet.get(user, handle);
    const tail = this.next(
      user,
      handle,
      row === undefined ? undefined : row.log_tail as string | null,
      entry,
      retention,
      now,
      stateBytes,
    );
    if (tail !== null) this.#tailSet.run(tail, user, handle);
    else if (row?.log_tail != null) this.#tailClear.run(user, handle);
  }

  /**
   * Appends `entry` for a caller that rewrites the record's row itself: what
   * goes to the keyed table is written there, and the tail the row is to
   * hold is returned (`null`: none). The caller's row write then costs no
   * statement of its own for the tail.
   *
   * @param tailCell The row's `log_tail` before the write; `undefined` when
   *   there is no row.
   * @param stateBytes As for {@link ChangeLog.append}.
   */
  next(
    user: string,
    handle: string,
    tailCell: string | null | undefined,
    entry: ChangeEntry,
    retention: Retention | undefined,
    now: number,
    stateBytes?: number,
  ): string | null {
    if (tailCell == null && (stateBytes === undefined || tailCell === undefined)) {
      // No tail: the entry goes where it always went.
      if (retention) {
        this.#trim.run(
          user,
          handle,
          entry.version - retention.maxEntries,
          now - retention.maxAgeMs,
        );
      }
      this.#put.run(user, handle, entry.version, entry.at, entry.text);
      return null;
    }
    const key = tailKey(user, handle);
    const known = tailCell == null ? undefined : this.#tails.get(key);
    if (known !== undefined && known.text === tailCell && stateBytes !== undefined) {
      const text = this.#appended(key, known, entry, retention, now, stateBytes);
      if (text !== undefined) return text;
    }
    const tail: Tail = tailCell == null
      ? { floorVersion: null, floorAt: null, entries: [] }
      : parseTail(tailCell);
    if (retention) {
      tail.floorVersion = max(tail.floorVersion, entry.version - retention.maxEntries);
      tail.floorAt = max(tail.floorAt, now - retention.maxAgeMs);
    }
    const fv = tail.floorVersion ?? -Infinity, fa = tail.floorAt ?? -Infinity;
    tail.entries = tail.entries.filter((e) =>
      e.version > fv && e.at >= fa && e.version < entry.version
    );
    tail.entries.push(entry);
    if (stateBytes !== undefined && tail.entries.length <= TAIL_MAX_ENTRIES) {
      const info = infoOf(tail);
      if (stateBytes + info.bytes <= TAIL_ROW_MAX) return this.#keep(info, key);
    }
    this.#tails.set(key, null);
    this.#spill(user, handle, tail);
    return null;
  }

  /**
   * The common append, without parsing the tail: `entry` goes at the end of
   * `known` (the row's tail, as this connection computed it) when the
   * retention drops none of its entries and the row still fits; the text is
   * what {@link tailText} writes for the same entries. `undefined` when it
   * does not apply.
   */
  #appended(
    key: string,
    known: TailInfo,
    entry: ChangeEntry,
    retention: Retention | undefined,
    now: number,
    stateBytes: number,
  ): string | undefined {
    let floorVersion = known.floorVersion, floorAt = known.floorAt;
    if (retention) {
      floorVersion = max(floorVersion, entry.version - retention.maxEntries);
      floorAt = max(floorAt, now - retention.maxAgeMs);
    }
    if (
      known.count >= TAIL_MAX_ENTRIES || known.maxVersion >= entry.version ||
      known.minVersion <= (floorVersion ?? -Infinity) || known.minAt < (floorAt ?? -Infinity)
    ) return undefined;
    const head = floorText(floorVersion, floorAt);
    const added = `,${JSON.stringify(entry.version)},${JSON.stringify(entry.at)},${
      JSON.stringify(entry.text)
    }]`;
    // The floor is ASCII: the entries keep their bytes.
    const bytes = head.length + known.bytes - known.head - 1 + utf8Length(added);
    if (stateBytes + bytes > TAIL_ROW_MAX) return undefined;
    const text = head + known.text.slice(known.head, -1) + added;
    return this.#keep({
      text,
      floorVersion,
      floorAt,
      head: head.length,
      bytes,
      count: known.count + 1,
      minVersion: Math.min(known.minVersion, entry.version),
      maxVersion: entry.version,
      minAt: Math.min(known.minAt, entry.at),
    }, key);
  }

  /** Remembers `info` as the tail of `key`, and answers its text. */
  #keep(info: TailInfo, key: string): string {
    this.#tails.set(key, info);
    return info.text;
  }

  /**
   * Moves the handle's tail, if any, to the keyed table (before its record
   * leaves `handles` for the trash, whose rows keep no tail).
   */
  flush(user: string, handle: string): void {
    const cell = this.#tailGet.get(user, handle)?.log_tail as string | null | undefined;
    if (cell != null) this.#move(user, handle, parseTail(cell));
  }

  /** Drops the handle's keyed entries (its row, if any, keeps its tail). */
  drop(user: string, handle: string): void {
    this.#drop.run(user, handle);
  }

  /** Drops the handle's whole log, its row's tail included. */
  clear(user: string, handle: string): void {
    this.#drop.run(user, handle);
    this.#tailClear.run(user, handle);
  }

  /** Writes a tail's entries to the keyed table, deletes what its floor hides, clears it. */
  #move(user: string, handle: string, tail: Tail): void {
    this.#spill(user, handle, tail);
    this.#tailClear.run(user, handle);
  }

  /** Writes a tail's entries to the keyed table and deletes what its floor hides. */
  #spill(user: string, handle: string, tail: Tail): void {
    if (tail.floorVersion !== null || tail.floorAt !== null) {
      this.#trim.run(user, handle, tail.floorVersion ?? -1, tail.floorAt ?? -1);
    }
    for (const e of tail.entries) this.#put.run(user, handle, e.version, e.at, e.text);
  }
}
