/**
 * Every stored copy of state content on the memory backend (SPEC 9.2,
 * `mcpstate encrypt`): records live and trashed, their changelogs, and the
 * records kept for idempotency keys, scanned in one sorted order and
 * rewritten in place, each call one synchronous step.
 *
 * @module
 */

import type * as B from "../../backend.ts";

/** The maps of a memory backend that hold content, shared, not copied. */
export interface ContentMaps {
  /** Records by user, then handle. */
  users: Map<string, Map<string, B.HandleRecord>>;
  /** Idempotency records, keyed `[user, scope, key]` as JSON. */
  idem: Map<string, { result: B.HandleRecord | null }>;
  /** Changelogs, keyed `[user, handle]` as JSON. */
  logs: Map<string, B.ChangeEntry[]>;
  /** Trashed records with their changelogs, keyed `[user, handle]` as JSON. */
  trash: Map<string, { record: B.HandleRecord; log: B.ChangeEntry[] }>;
}

/**
 * Where a copy is: `["r" | "t", user, handle]`, `["e" | "te", user, handle,
 * version]` (an entry of a live or a trashed record's log) or `["k", user,
 * scope, key]`; its JSON is the scan order.
 */
type Ref = [string, ...(string | number)[]];

/** The texts of a record: its state, and its preview when it has one. */
function textsOf(r: B.HandleRecord): string[] {
  return r.preview === undefined ? [r.state] : [r.state, r.preview];
}

/** A record with the texts `texts` in place of its state and preview. */
function withTexts(r: B.HandleRecord, texts: string[]): B.HandleRecord {
  const out = { ...r, state: texts[0]! };
  if (texts[1] !== undefined) out.preview = texts[1];
  return out;
}

/** The copy `ref` names, as it is now; `null` when gone. */
function find(m: ContentMaps, ref: Ref): StoredContentOf | null {
  const [where, user, a, b] = ref as [string, string, string, string | number];
  if (where === "r") {
    const r = m.users.get(user)?.get(a);
    return r ? { kind: "record", user, handle: a, texts: textsOf(r), ref } : null;
  }
  if (where === "t") {
    const t = m.trash.get(JSON.stringify([user, a]));
    return t ? { kind: "trash", user, handle: a, texts: textsOf(t.record), ref } : null;
  }
  if (where === "k") {
    const r = m.idem.get(JSON.stringify([user, a, b]))?.result;
    return r ? { kind: "result", user, handle: r.handle, texts: textsOf(r), ref } : null;
  }
  const e = logOf(m, where, user, a)?.find((e) => e.version === b);
  return e ? { kind: "entry", user, handle: a, texts: [e.text], ref } : null;
}

type StoredContentOf = B.StoredContent & { ref: Ref };

/** The log of a live (`e`) or trashed (`te`) record. */
function logOf(m: ContentMaps, where: string, user: string, handle: string) {
  const key = JSON.stringify([user, handle]);
  return where === "e" ? m.logs.get(key) : m.trash.get(key)?.log;
}

/** Every copy's place, in scan order. */
function places(m: ContentMaps): { key: string; ref: Ref }[] {
  const refs: Ref[] = [];
  for (const [user, records] of m.users) {
    for (const handle of records.keys()) refs.push(["r", user, handle]);
  }
  for (const [key, t] of m.trash) {
    const [user, handle] = JSON.parse(key) as [string, string];
    refs.push(["t", user, handle]);
    for (const e of t.log) refs.push(["te", user, handle, e.version]);
  }
  for (const [key, log] of m.logs) {
    const [user, handle] = JSON.parse(key) as [string, string];
    for (const e of log) refs.push(["e", user, handle, e.version]);
  }
  for (const [key, i] of m.idem) {
    if (i.result) refs.push(["k", ...(JSON.parse(key) as [string, string, string])]);
  }
  return refs.map((ref) => ({ key: JSON.stringify(ref), ref }))
    .sort((x, y) => (x.key < y.key ? -1 : x.key > y.key ? 1 : 0));
}

/** Writes `texts` in place of the copy `ref` names (which exists). */
function put(m: ContentMaps, ref: Ref, texts: string[]): void {
  const [where, user, a, b] = ref as [string, string, string, string | number];
  if (where === "r") {
    const records = m.users.get(user)!;
    records.set(a, withTexts(records.get(a)!, texts));
  } else if (where === "t") {
    const t = m.trash.get(JSON.stringify([user, a]))!;
    t.record = withTexts(t.record, texts);
  } else if (where === "k") {
    const i = m.idem.get(JSON.stringify([user, a, b]))!;
    i.result = withTexts(i.result!, texts);
  } else {
    const log = logOf(m, where, user, a)!;
    const at = log.findIndex((e) => e.version === b);
    log[at] = { ...log[at]!, text: texts[0]! };
  }
}

/**
 * The content primitives of a memory backend.
 *
 * @param m The backend's maps.
 * @returns The primitives.
 */
export function memoryContent(m: ContentMaps): B.ContentPrimitives {
  return {
    scan: ({ after, limit }) => {
      const page = places(m).filter((p) => after === undefined || p.key > after).slice(0, limit);
      const items = page.map((p) => find(m, p.ref)!);
      return Promise.resolve({
        items,
        next: page.length < limit ? null : page[page.length - 1]!.key,
      });
    },
    replace: (item, texts) => {
      const ref = item.ref as Ref;
      const current = find(m, ref);
      const same = current !== null && current.texts.length === item.texts.length &&
        current.texts.every((t, i) => t === item.texts[i]);
      if (!same || texts.length !== item.texts.length) {
        return Promise.resolve({ replaced: false, current });
      }
      put(m, ref, texts);
      return Promise.resolve({ replaced: true, current: null });
    },
  };
}
