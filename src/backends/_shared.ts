/**
 * Helpers shared by the backends (private to the package).
 *
 * @module
 */

import type {
  Backend,
  ConditionalWrite,
  HandleRecord,
  Replayed,
  SaveOutcome,
  UpdateOutcome,
  WriteContext,
} from "../backend.ts";
import { isReplayed } from "../backend.ts";

/**
 * The message of a thrown value, for error messages.
 *
 * @param e What was thrown.
 * @returns Its message, or its text.
 */
export function messageOf(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

/**
 * The listing order: `updatedAt` descending, then `handle` ascending.
 *
 * @param a One position.
 * @param b Another.
 * @returns Negative when `a` comes first.
 */
export function compareListOrder(
  a: { updatedAt: number; handle: string },
  b: { updatedAt: number; handle: string },
): number {
  if (a.updatedAt !== b.updatedAt) return b.updatedAt - a.updatedAt;
  return a.handle < b.handle ? -1 : a.handle > b.handle ? 1 : 0;
}

/**
 * The order of {@link TrashPrimitives.list}: `trashUntil` descending, then
 * `handle` ascending (code units).
 *
 * @param a A trashed record.
 * @param b Another.
 * @returns Negative when `a` comes first.
 */
export function compareTrashOrder(
  a: { trashUntil: number; handle: string },
  b: { trashUntil: number; handle: string },
): number {
  return compareListOrder(
    { updatedAt: a.trashUntil, handle: a.handle },
    { updatedAt: b.trashUntil, handle: b.handle },
  );
}

/**
 * Listeners of {@link FeedPrimitives.subscribe}, by `(user, handle)`: backends add
 * to it, and call {@link Listeners.notify} after their own commits and when
 * their engine's feed reports another writer's.
 */
export class Listeners {
  #by = new Map<string, Set<() => void>>();

  /** The registry key of `(user, handle)`. */
  static key(user: string, handle: string): string {
    return JSON.stringify([user, handle]);
  }

  /** How many `(user, handle)` pairs have at least one listener. */
  get size(): number {
    return this.#by.size;
  }

  /**
   * Adds a listener.
   *
   * @returns An idempotent remover.
   */
  add(user: string, handle: string, listener: () => void): () => void {
    const key = Listeners.key(user, handle);
    let set = this.#by.get(key);
    if (!set) this.#by.set(key, set = new Set());
    const fn = () => listener();
    set.add(fn);
    let live = true;
    return () => {
      if (!live) return;
      live = false;
      set.delete(fn);
      if (set.size === 0 && this.#by.get(key) === set) this.#by.delete(key);
    };
  }

  /** Whether `(user, handle)` has a listener. */
  has(user: string, handle: string): boolean {
    return this.#by.has(Listeners.key(user, handle));
  }

  /** Calls the listeners of `(user, handle)` (by registry key); a throwing listener is ignored. */
  notifyKey(key: string): void {
    for (const fn of [...(this.#by.get(key) ?? [])]) {
      try {
        fn();
      } catch { /* a listener must not throw; ignore one that does */ }
    }
  }

  /** Calls the listeners of `(user, handle)`. */
  notify(user: string, handle: string): void {
    if (this.#by.size > 0) this.notifyKey(Listeners.key(user, handle));
  }

  /** Calls every listener (an engine feed that cannot tell which handle changed). */
  notifyAll(): void {
    for (const key of [...this.#by.keys()]) this.notifyKey(key);
  }
}

/** Thrown by the change of {@link saveByUpdate} when the conditional write does not apply. */
class NotApplied {
  constructor(readonly current: HandleRecord | null) {}
}

/**
 * The conditional write of {@link Backend.save} through {@link Backend.update}:
 * one read-modify-write step that applies the write when the stored version
 * is `write.expectVersion` and the record is live at `ctx.now`, and else
 * aborts (so nothing is written and no idempotency record is kept). For a
 * backend where one conditional statement does not beat its `update`.
 *
 * @param update The backend's `update`, bound to it.
 * @param user The user.
 * @param handle The handle.
 * @param write The conditional write.
 * @param ctx The write context.
 * @returns What `save` answers.
 */
export async function saveByUpdate(
  update: Backend["update"],
  user: string,
  handle: string,
  write: ConditionalWrite,
  ctx: WriteContext,
): Promise<SaveOutcome | Replayed> {
  let out: UpdateOutcome | Replayed;
  try {
    out = await update(user, handle, (cur) => {
      if (
        !cur || cur.version !== write.expectVersion ||
        (cur.expiresAt !== null && cur.expiresAt <= ctx.now)
      ) {
        throw new NotApplied(cur);
      }
      return {
        record: {
          ...cur,
          state: write.state,
          version: cur.version + 1,
          updatedAt: write.updatedAt,
          expiresAt: write.expiresAt === "keep" ? cur.expiresAt : write.expiresAt,
          lastWriter: write.lastWriter,
          ...(write.schemaVersion === undefined ? {} : { schemaVersion: write.schemaVersion }),
          ...(write.preview === undefined ? {} : { preview: write.preview }),
        },
      };
    }, ctx);
  } catch (e) {
    if (e instanceof NotApplied) return { ok: false, current: e.current };
    throw e;
  }
  if (isReplayed(out)) return out;
  return out.lease
    ? { ok: true, record: out.record!, lease: out.lease }
    : { ok: true, record: out.record! };
}
