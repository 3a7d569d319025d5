/**
 * The states a store last saved, parsed: a save diffs the state it replaces
 * against the one kept here instead of parsing the stored text again, for
 * as long as the stored text is exactly the one kept (compared on each use,
 * so another writer's change only costs the parse). A kept state is built
 * once from the previous one by the save's own patch, and never handed out
 * or changed: readers only diff it and replay patches on it, which copy what
 * they change.
 *
 * @module
 */

import { ByteCappedCache } from "../backends/_cache.ts";
import { applyJsonPatch, JsonPatchMismatch } from "../history.ts";
import { decodeState, type JsonObject } from "../json.ts";
import type { JsonPatchOp } from "../ops.ts";

/** The largest state kept, and the most kept in all (UTF-16 units of their text). */
const MAX_STATE = 1 << 20;
const MAX_TOTAL = 1 << 22;

/** A kept state: its text, and the state it parses to. */
interface Kept {
  text: string;
  state: JsonObject;
}

/** The key of `(user, handle)`: the user's length first, so that no two meet. */
function keyOf(user: string, handle: string): string {
  return `${user.length}:${user}${handle}`;
}

/** The parsed states of one store. */
export class ParsedStates {
  readonly #kept = new ByteCappedCache<Kept>(MAX_STATE, MAX_TOTAL, (k) => k.text.length);

  /**
   * The state `text` parses to: the one kept for `(user, handle)` when its
   * text is `text`, else a fresh parse. Read it only (see the module doc).
   */
  parse(user: string, handle: string, text: string): JsonObject {
    const kept = this.#kept.get(keyOf(user, handle));
    return kept !== undefined && kept.text === text ? kept.state : decodeState(text);
  }

  /**
   * `patch` (a diff from `before`, see `diffKeyed`) applied to `before`, its
   * values copied, and the undo back: the state to {@link ParsedStates.keep}
   * once the write lands, and the patch and undo its entry keeps.
   * `undefined` when the patch does not replay on `before`.
   */
  replay(
    before: JsonObject,
    patch: JsonPatchOp[],
  ): { state: JsonObject; patch: JsonPatchOp[]; undo: JsonPatchOp[] } | undefined {
    // Copies, so that nothing kept is the caller's (who may change it later).
    const own = patch.map((op) =>
      typeof op.value === "object" && op.value !== null
        ? { ...op, value: JSON.parse(JSON.stringify(op.value)) }
        : op
    );
    const undo: JsonPatchOp[] = [];
    try {
      return { state: applyJsonPatch(before, own, undo), patch: own, undo };
    } catch (e) {
      if (e instanceof JsonPatchMismatch) return undefined;
      throw e;
    }
  }

  /** Keeps `state` as what `text`, the state just written to `(user, handle)`, parses to. */
  keep(user: string, handle: string, text: string, state: JsonObject): void {
    this.#kept.set(keyOf(user, handle), { text, state });
  }

  /** Forgets every kept state (a user was erased). */
  clear(): void {
    this.#kept.clear();
  }
}
