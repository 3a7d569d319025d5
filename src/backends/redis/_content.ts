/**
 * Every stored copy of state content on Redis (SPEC 9.2, `mcpstate
 * encrypt`), standalone and Cluster: a `SCAN` of every primary, one page at
 * a time, for record hashes live and trashed (`P{T}:r:H`, `P{T}:t:H`: the
 * state and preview in `d` and `m`, the changelog entries in `e<v>`) and
 * idempotency records (`P{T}:d:…`: the kept result in `d`); see the layout
 * in `_scripts.ts`.
 *
 * A rewrite is one script in the user's slot that writes the new field only
 * while the old one's SHA-1 is the one read (so a write since wins), keeps
 * the key's TTL, and moves a live record's usage by the state's new size.
 *
 * @module
 */

import { createHash } from "node:crypto";
import type * as B from "../../backend.ts";
import { utf8Length } from "../../json.ts";
import { Cluster } from "ioredis";
import { decodeHandle, decodeName, metaText, recordOf } from "./_codec.ts";
import type { Connection } from "./_connection.ts";
import type { KeySpace } from "./_keys.ts";
import { script } from "./_prelude.ts";

/**
 * Replaces field ARGV[1] of hash KEYS[1] by ARGV[3] (and `m` by ARGV[4]
 * unless it is `''`) when the field's SHA-1 is ARGV[2]; adds ARGV[5] bytes
 * to the usage hash KEYS[2] while it exists. Replies 1 when it replaced.
 */
const REPLACE = script(`
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if not cur or redis.sha1hex(cur) ~= ARGV[2] then return 0 end
if ARGV[4] ~= '' then
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[3], 'm', ARGV[4])
else
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
end
local d = tonumber(ARGV[5])
if d ~= 0 and redis.call('EXISTS', KEYS[2]) == 1 then redis.call('HINCRBY', KEYS[2], 'b', d) end
return 1
`);

/** Where a copy is: its hash, its field, and the SHA-1 of the field as read. */
interface Ref {
  key: string;
  field: string;
  sum: string;
}

const sha1 = (text: string) => createHash("sha1").update(text).digest("hex");

/** The state and the `m` field of a `d` field (metadata, newline, state). */
function split(d: string): { m: string; state: string } {
  const nl = d.indexOf("\n");
  return { m: d.slice(0, nl), state: d.slice(nl + 1) };
}

/** The texts a field holds: a `d` field's state and preview, an entry's text. */
function textsOf(field: string, value: string): string[] {
  if (field !== "d") return [value.slice(value.indexOf("\t") + 1)];
  const { m, state } = split(value);
  const preview = recordOf("", null, m).preview;
  return preview === undefined ? [state] : [state, preview];
}

/** The content primitives of the Redis backend. */
export class RedisContent implements B.ContentPrimitives {
  readonly #conn: Connection;
  readonly #k: KeySpace;
  readonly #forget: (key: string) => void;
  /** Matches a content key: `P{T}:` (group 1), `T` (2), its type (3) and the rest (4). */
  readonly #name: RegExp;

  /**
   * @param conn The backend's connection.
   * @param keys Its key names.
   * @param forget Drops what this process guessed of a record key (it is rewritten).
   */
  constructor(conn: Connection, keys: KeySpace, forget: (key: string) => void) {
    this.#conn = conn;
    this.#k = keys;
    this.#forget = forget;
    this.#name = keys.nameRegExp((p) => "(" + p + "\\{([^}]*)\\}:)([rtd]):(.*)");
  }

  /** {@inheritDoc ContentPrimitives.scan} */
  async scan(query: { after?: string; limit: number }): Promise<B.ContentPage> {
    const c = this.#conn.client;
    const nodes = c instanceof Cluster ? c.nodes("master") : [c];
    let [node, cursor] = query.after === undefined
      ? [0, "0"]
      : JSON.parse(query.after) as [number, string];
    if (node >= nodes.length) return { items: [], next: null };
    const [next, keys] = await this.#conn.cmd(() =>
      nodes[node]!.scan(cursor, "MATCH", this.#k.pattern("[rtd]:*"), "COUNT", query.limit)
    );
    cursor = next;
    if (cursor === "0") node++;
    const items = (await Promise.all(keys.map((key) => this.#copies(key)))).flat();
    return { items, next: node >= nodes.length ? null : JSON.stringify([node, cursor]) };
  }

  /** The copies one hash holds (none when it is not one of this backend's, or is gone). */
  async #copies(key: string, only?: string): Promise<B.StoredContent[]> {
    const m = this.#name.exec(key);
    if (!m) return [];
    let user: string;
    try {
      user = decodeName(m[2]!);
    } catch {
      return []; // not a name this backend encoded
    }
    if (this.#k.base(user) !== m[1]) return [];
    const type = m[3]!;
    const c = this.#conn.client;
    const fields = only === undefined
      ? await this.#conn.cmd(() => c.hgetall(key))
      : Object.fromEntries([[only, await this.#conn.cmd(() => c.hget(key, only))]]);
    const out: B.StoredContent[] = [];
    for (const [field, value] of Object.entries(fields)) {
      if (typeof value !== "string") continue;
      const ref: Ref = { key, field, sum: sha1(value) };
      const texts = textsOf(field, value);
      if (field === "d") {
        const handle = type === "d" ? decodeHandle(fields.h ?? "") : decodeHandle(m[4]!);
        const kind = type === "r" ? "record" : type === "t" ? "trash" : "result";
        out.push({ kind, user, handle, texts, ref });
      } else if (type !== "d" && /^e\d+$/.test(field)) {
        out.push({ kind: "entry", user, handle: decodeHandle(m[4]!), texts, ref });
      }
    }
    return out;
  }

  /** {@inheritDoc ContentPrimitives.replace} */
  async replace(
    item: B.StoredContent,
    texts: string[],
  ): Promise<{ replaced: boolean; current: B.StoredContent | null }> {
    const { key, field, sum } = item.ref as Ref;
    const c = this.#conn.client;
    const old = await this.#conn.cmd(() => c.hget(key, field));
    let value: string, meta = "", delta = 0;
    const was = old === null ? [] : textsOf(field, old);
    if (
      old === null || sha1(old) !== sum || was.length !== item.texts.length ||
      was.some((t, i) => t !== item.texts[i])
    ) return { replaced: false, current: await this.#one(item) };
    if (field === "d") {
      const { m, state } = split(old);
      const r = recordOf(item.handle, texts[0], m);
      if (texts[1] !== undefined) r.preview = texts[1];
      const next = metaText(r);
      value = `${next}\n${texts[0]}`;
      if (item.kind !== "result") meta = next;
      if (item.kind === "record") delta = utf8Length(texts[0]!) - utf8Length(state);
    } else value = `${old.slice(0, old.indexOf("\t"))}\t${texts[0]}`;
    if (item.kind === "record") this.#forget(key);
    const base = this.#name.exec(key)![1]!;
    const reply = await this.#conn.run(
      REPLACE,
      [key, `${base}q`],
      [field, sum, value, meta, String(delta)],
      (r) => Number(r) === 1,
    );
    if (Number(reply) === 1) return { replaced: true, current: null };
    return { replaced: false, current: await this.#one(item) };
  }

  /** The copy `item` names, as it is now; `null` when gone. */
  async #one(item: B.StoredContent): Promise<B.StoredContent | null> {
    const { key, field } = item.ref as Ref;
    return (await this.#copies(key, field))[0] ?? null;
  }
}
