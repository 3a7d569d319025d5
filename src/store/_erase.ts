/**
 * Erasing a user (SPEC 9.1): every record, changelog, idempotency record,
 * lease, usage row and grant of the user, gone in one step of the backend.
 *
 * @module
 */

import type { ErasureCounts } from "../backend.ts";
import { checkOptions, checkUser, unsupported } from "./_check.ts";
import { call, type Core } from "./_core.ts";

/** Erases a user, or counts what erasing would remove (see {@link HandleStore.erase}). */
export function erase(
  core: Core,
  user: string,
  options: { dryRun?: boolean },
): Promise<ErasureCounts> {
  try {
    checkUser({ user });
    checkOptions(options, "erase");
  } catch (e) {
    return Promise.reject(e);
  }
  const erasure = core.backend.erasure;
  if (!erasure) return Promise.reject(unsupported("erase a user"));
  const now = core.clock();
  if (options.dryRun === true) return call(core, () => erasure.count(user, now));
  // What this store keeps of states in memory (see `_states.ts`) goes too.
  core.states.clear();
  return call(core, () => erasure.erase(user, now)).finally(() => core.states.clear());
}
