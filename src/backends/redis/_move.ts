/**
 * Transfer on a Redis Cluster, where the old and the new owner's keys sit in
 * two hash slots and no one script can move a record between them (see the
 * `MOVE_*` scripts in `_scripts.ts`). A move is five scripts, each atomic in
 * one slot:
 *
 * 1. `MOVE_RESERVE` (new owner): refuses a taken handle, else marks the
 *    handle `R` (reserved by this move), so the new owner's misses find it.
 * 2. `MOVE_OUT` (old owner): checks the record is live (and, with a
 *    transfer's content sealed anew for the new owner, still the record it
 *    was made from), renames its hash (changelog included) to a transit key
 *    out of the old owner's view, with what the move still has to do (the
 *    content included).
 * 3. `MOVE_IN` (new owner): when the mark is still this move's `R`, writes
 *    the record (the transit hash, with the content's state, preview and
 *    entry texts in place of its own), applies the audit step, stores the
 *    kept grant, and turns the mark to `D`; a taken handle or a quota
 *    refusal here drops the mark.
 * 4. `MOVE_DONE` (old owner): drops the transit hash and the lease, and ends
 *    the grants in force on the handle; or `MOVE_BACK` after a refused step
 *    3: the transit hash goes back to the old owner's record.
 * 5. `MOVE_CLEAR` (new owner): drops the `D` mark.
 *
 * The record is live in one place at a time: the old owner's until step 2,
 * the new owner's from step 3. The transit hash keeps the old owner's
 * content as it was, so a move that goes back leaves it untouched. A crash
 * between steps leaves a transit hash or a mark, and any miss on the handle
 * of either user (`trashedUntil`, which the store calls on every not-found)
 * finishes the move from there: it runs the steps left, each of which does
 * nothing when it already ran. A reservation whose move never took the
 * record out is dropped once it is {@link STALE_RESERVATION_MS} old; step 3
 * then finds no mark and the record goes back.
 *
 * @module
 */

import type {
  AuditStep,
  GrantRecord,
  TransferContent,
  TransferOutcome,
  WriteContext,
} from "../../backend.ts";
import { BackendError } from "../../errors.ts";
import { auditArgs, encodeHandle, expiresText, quotaArgs, type Reply, wroteOne } from "./_codec.ts";
import type { Connection } from "./_connection.ts";
import type { RedisGrants } from "./_grants.ts";
import type { Keys, KeySpace } from "./_keys.ts";
import { S } from "./_scripts.ts";

/** How old a reservation (`R` mark) whose move never took the record out must be to be dropped. */
export const STALE_RESERVATION_MS = 30_000;

/** What a move still has to do once the record is in transit: the transit hash's `mv` field. */
interface Plan {
  /** The move's id. */
  id: string;
  /** The new owner. */
  to: string;
  /** The transfer's time (store clock): the arrival's `now`, the end of the old grants. */
  now: number;
  /** The grace period after expiry before Redis drops the record. */
  graceMs: number;
  /** The audit step's script arguments ({@link auditArgs}). */
  audit: [string, string];
  /** The kept grant, or `null`. */
  keep: GrantRecord | null;
  /** The new owner's quotas argument, or `null`. */
  quota: string | null;
  /** The content the record arrives with, if any (see `TransferContent`). */
  content?: TransferContent;
}

/** How a move ended: moved, refused (nothing moved), or the new owner's quota refusal. */
type Arrival = "moved" | "taken" | "back" | Reply;

/** The transit key `P{U}:v:H` of a record moving out of `k`'s user. */
const transitOf = (k: Keys): string => `${k.base}v:${k.enc}`;
/** The mark `P{T}:n:H` of a move into `k`'s user. */
const markOf = (k: Keys): string => `${k.base}n:${k.enc}`;

/** A transfer content's `cv` script argument (see `_move_scripts.ts`): `""` without one. */
export function contentCv(content: TransferContent | undefined): string {
  return content ? `${content.version}\t${content.entries.map((e) => e.version).join(",")}` : "";
}

/**
 * The metadata field `m` (see `metaText`) with its preview replaced by
 * `preview` (absent: none), every other field as it was.
 */
export function withPreview(m: string, preview: string | undefined): string {
  const f = m.split("\t");
  const head = f.slice(0, 6).join("\t"), sv = f[6] ?? "";
  const tags = f.slice(7).filter((t) => !t.startsWith("P"));
  if (preview !== undefined) tags.unshift(`P${preview.replace(/[\t\n]/g, " ")}`);
  if (tags.length > 0) return `${head}\t${sv}\t${tags.join("\t")}`;
  return sv === "" ? head : `${head}\t${sv}`;
}

/**
 * The standalone transfer script's content arguments (see `TRANSFER`):
 * `cv`, then the record's `m` now, the `m` and state to write and the
 * entries' texts; `[""]` without content.
 */
export async function contentArgs(
  conn: Connection,
  rec: string,
  content: TransferContent | undefined,
): Promise<string[]> {
  if (!content) return [""];
  const m = await conn.cmd(() => conn.client.hget(rec, "m")) ?? "";
  const texts = content.entries.map((e) => e.text);
  return [contentCv(content), m, withPreview(m, content.preview), content.state, ...texts];
}

/**
 * A transit hash's fields (flat) as the record arrives with `content`: `m`,
 * `d` and each entry `e<v>` (its `at` kept) hold the content's, and the
 * move's own fields are left out (the content travels there too).
 */
function arriving(fields: string[], content: TransferContent | undefined): string[] {
  if (!content) return fields;
  const texts = new Map(content.entries.map((e) => [e.version, e.text]));
  let m = "";
  for (let i = 0; i + 1 < fields.length; i += 2) if (fields[i] === "m") m = fields[i + 1]!;
  m = withPreview(m, content.preview);
  const out: string[] = [];
  for (let i = 0; i + 1 < fields.length; i += 2) {
    const f = fields[i]!, v = fields[i + 1]!;
    if (f === "mi" || f === "mv") continue;
    const entry = /^e(\d+)$/.exec(f);
    const text = entry ? texts.get(Number(entry[1])) : undefined;
    if (entry && text === undefined) {
      throw new BackendError(`The transfer's content lacks the entry ${f.slice(1)}; retry.`);
    }
    out.push(
      f,
      f === "m"
        ? m
        : f === "d"
        ? `${m}\n${content.state}`
        : entry
        ? `${v.split("\t")[0]}\t${text}`
        : v,
    );
  }
  return out;
}

/** A hash as HGETALL's flat field/value list. */
function flat(hash: Record<string, string>): string[] {
  return Object.entries(hash).flat();
}

/** The transfer primitive of the Redis backend on a Redis Cluster. */
export class RedisMoves {
  readonly #conn: Connection;
  readonly #k: KeySpace;
  readonly #grants: RedisGrants;

  /**
   * @param conn The backend's connection.
   * @param keys Its key names.
   * @param grants Its grants (for the kept grant's names).
   */
  constructor(conn: Connection, keys: KeySpace, grants: RedisGrants) {
    this.#conn = conn;
    this.#k = keys;
    this.#grants = grants;
  }

  /**
   * {@inheritDoc TransferPrimitives.move}
   *
   * A quota refusal of the new owner comes back as the script's reply, for
   * the caller's `refuseQuota`.
   */
  async transfer(
    user: string,
    handle: string,
    to: string,
    ctx: WriteContext,
    audit: AuditStep | undefined,
    keep: GrantRecord | undefined,
    content?: TransferContent,
  ): Promise<TransferOutcome | Reply> {
    const plan: Plan = {
      id: crypto.randomUUID(),
      to,
      now: ctx.now,
      graceMs: ctx.graceMs,
      audit: auditArgs(audit, this.#k.of(to, handle).enc),
      keep: keep ? { ...keep, endedAt: null } : null,
      quota: quotaArgs(ctx)[0] ?? null,
      ...(content ? { content } : {}),
    };
    const names = keep ? await this.#grants.name(keep) : undefined;
    // A failure midway leaves the names: a later miss may still finish the move.
    const out = await this.#move(user, handle, plan);
    if (out !== "moved") await names?.unname();
    if (Array.isArray(out)) return out;
    if (out === "back") {
      throw new BackendError(
        `The transfer of ${handle} was interrupted and rolled back; nothing moved. Retry.`,
      );
    }
    return out;
  }

  /** Steps 1 to 5 of a move: reserve, out, then {@link RedisMoves.#arrive}. */
  async #move(user: string, handle: string, plan: Plan): Promise<Arrival | TransferOutcome> {
    const k = this.#k.of(user, handle), t = this.#k.of(plan.to, handle);
    const mark = `R\t${plan.id}\t${Date.now()}\t${user}`;
    for (let attempt = 0;; attempt++) {
      const r = await this.#conn.run(
        S.moveReserve,
        [t.rec, t.trash, markOf(t), transitOf(t)],
        [mark],
        wroteOne,
      ) as number | Reply;
      if (r === 1) break;
      if (r === -1) return "taken";
      if (attempt >= 2) {
        throw new BackendError(
          "Another transfer of this handle to that user is under way; retry shortly.",
        );
      }
      // A move of this handle into or out of the new owner is unfinished: finish it first.
      await this.recover(plan.to, handle);
    }
    for (let attempt = 0;; attempt++) {
      const r = await this.#conn.run(
        S.moveOut,
        [k.rec, k.idx, k.exp, transitOf(k)],
        [plan.audit[0], plan.id, JSON.stringify(plan), contentCv(plan.content)],
        Array.isArray,
      ) as number | Reply;
      if (Array.isArray(r) && r[0] !== "P") {
        return await this.#arrive(user, handle, plan, r as string[]);
      }
      if (r === 0 || r === -2 || attempt >= 2) {
        await this.#conn.run(S.moveClear, [markOf(t)], ["R", plan.id], wroteOne);
        if (r === 0) return "absent";
        if (r === -2) return "changed";
        throw new BackendError("Another transfer of this handle is under way; retry shortly.");
      }
      // An earlier move of this handle out of the user is unfinished: finish it first.
      await this.recover(user, handle);
    }
  }

  /**
   * Steps 3 to 5 of a move whose record is in transit (`fields`: the transit
   * hash): in, then done and clear, or back.
   */
  async #arrive(user: string, handle: string, plan: Plan, transit: string[]): Promise<Arrival> {
    const k = this.#k.of(user, handle), t = this.#k.of(plan.to, handle);
    const fields = arriving(transit, plan.content);
    const keep = plan.keep;
    const keys = [t.rec, t.idx, t.exp, t.trash, markOf(t)];
    if (keep) keys.push(this.#k.grant(plan.to, keep.grant), this.#k.grantsOf(plan.to, handle));
    const head = `${plan.id}\t${plan.now}\t${plan.graceMs}\t${
      keep ? encodeHandle(keep.grant) : ""
    }\t${keep ? expiresText(keep.expiresAt) : ""}`;
    const r = await this.#conn.run(S.moveIn, keys, [
      head,
      ...plan.audit,
      keep ? JSON.stringify(keep) : "",
      String(fields.length / 2),
      ...fields,
      ...(plan.quota === null ? [] : [plan.quota]),
    ], wroteOne) as number | Reply;
    if (r === 1 || r === 2) {
      await this.#conn.run(
        S.moveDone,
        [k.rec, transitOf(k), k.lease, this.#k.grantsOf(user, handle)],
        [plan.id, String(plan.now)],
        wroteOne,
      );
      await this.#conn.run(S.moveClear, [markOf(t)], ["D", plan.id], wroteOne);
      return "moved";
    }
    await this.#conn.run(
      S.moveBack,
      [k.rec, k.idx, k.exp, transitOf(k)],
      [plan.id, String(plan.now), String(plan.graceMs)],
      wroteOne,
    );
    if (r === -1) return "taken";
    return Array.isArray(r) ? r : "back";
  }

  /**
   * What a miss of `(user, handle)` finds on a Redis Cluster: the trash's
   * `trashUntil` (as `trashedUntil` answers), after finishing any move of
   * that handle out of or into the user that a crash left unfinished.
   */
  async trashedUntil(user: string, handle: string): Promise<number | null> {
    const [u, mv, mark] = await this.#pending(user, handle);
    if (mv !== null || mark !== null) await this.#finish(user, handle, mv, mark);
    return u === null ? null : Number(u);
  }

  /** Finishes any unfinished move of `handle` out of or into `user`. */
  async recover(user: string, handle: string): Promise<void> {
    const [, mv, mark] = await this.#pending(user, handle);
    await this.#finish(user, handle, mv, mark);
  }

  /** The trash's `u`, the transit hash's plan and the mark of `(user, handle)`. */
  async #pending(
    user: string,
    handle: string,
  ): Promise<[string | null, string | null, string | null]> {
    const k = this.#k.of(user, handle);
    const r = await this.#conn.run(S.movePending, [k.trash, transitOf(k), markOf(k)], []) as Reply;
    const text = (x: unknown) => typeof x === "string" ? x : null;
    return [text(r[0]), text(r[1]), text(r[2])];
  }

  /** Runs the steps left of the moves that `mv` (out of `user`) and `mark` (into it) name. */
  async #finish(
    user: string,
    handle: string,
    mv: string | null,
    mark: string | null,
  ): Promise<void> {
    if (mv !== null) await this.#resume(user, handle, (JSON.parse(mv) as Plan).id);
    if (mark === null) return;
    const [kind, id = "", at = "0", ...rest] = mark.split("\t");
    if (await this.#resume(rest.join("\t"), handle, id)) return;
    // No transit hash of that move: it arrived and is done (D), or never took the record out (R).
    if (kind === "D" || Date.now() - Number(at) > STALE_RESERVATION_MS) {
      await this.#conn.run(S.moveClear, [markOf(this.#k.of(user, handle))], [kind!, id], wroteOne);
    }
  }

  /**
   * Runs steps 3 to 5 of move `id` when its record is in transit out of
   * `user`; whether it was.
   */
  async #resume(user: string, handle: string, id: string): Promise<boolean> {
    const key = transitOf(this.#k.of(user, handle));
    const hash = await this.#conn.cmd(() => this.#conn.client.hgetall(key));
    if (hash.mi !== id || hash.mv === undefined) return false;
    await this.#arrive(user, handle, JSON.parse(hash.mv) as Plan, flat(hash));
    return true;
  }
}
