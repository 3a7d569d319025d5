/**
 * `mcpstate keys rotate` (SPEC 9.2): rewraps every user's data key under
 * the ring's current key-encryption key (the first of
 * `MCPSTATE_ENCRYPTION_KEYS`), online and resumable: each key is rewrapped
 * by one compare-and-set, and both keys open it meanwhile. Afterwards the
 * other keys can leave the ring; the command says so once the data keys in
 * use are all under the current one, and exits 1 while some are not.
 *
 * @module
 */

import type { RotateCounts } from "../store/_encrypt.ts";
import { type Command, defineCommand, EXIT_FAILURE, EXIT_OK, UsageError } from "./_command.ts";
import * as M from "./_maintain.ts";
import { note, printResult } from "./_output.ts";
import { backendHelp } from "./_store.ts";

const HELP = `Usage: mcpstate keys rotate [options]

Rewraps every user's data key under the current key-encryption key: the
first of MCPSTATE_ENCRYPTION_KEYS (or of --encryption-keys-file); the others
are the old keys, which still open what they wrapped. The data itself is not
rewritten (it stays under the users' data keys). Data keys kept apart
(--key-store, MCPSTATE_KEY_STORE) are rotated there.

Online and resumable: servers keep running (give them the new ring first,
new key first, so that the keys they make are under it), and every handle
stays readable throughout. Each data key is rewrapped in one atomic
compare-and-set; stop it at any point and run it again: it skips the keys
already under the current one. Once it reports every data key under the
current key, the old keys can leave the ring. Exit code 1 while some are not.

Options:
${M.maintainHelp('Print {"ok": …, "current": ID, "rewrapped": N, "already": N, …}')}
${backendHelp()}
`;

/** The `keys` subcommand: `keys rotate`. */
export const keys: Command = defineCommand({
  name: "keys",
  summary: "keys rotate: rewrap every data key under the current key",
  help: HELP,
  options: M.MAINTAIN_OPTIONS,
  positionals: [1, 1],
  async run(values, [action]) {
    if (action !== "rotate") {
      throw new UsageError(
        `Unknown keys action ${JSON.stringify(action)}; the one action is: mcpstate keys rotate.`,
      );
    }
    await using store = await M.keyedStore(values, "keys rotate");
    const { options, finish } = M.runOptions(values, "rotate", "data keys");
    let c: RotateCounts;
    try {
      c = await store.maintenance.rotateKeys(options);
    } finally {
      finish();
    }
    // Keys made meanwhile by a server still on an older ring are under another key.
    const census = await store.maintenance.census();
    const others = Object.entries(census.keyIds).filter(([id]) => id !== c.current);
    const old = census.ring.filter((id) => id !== c.current);
    const ok = others.length === 0;
    const done = `Rewrapped ${M.counted(c.rewrapped, "data key")} under ${c.current}; ${
      M.counted(c.already, "was", "were")
    } under it already.`;
    const after = ok
      ? old.length > 0
        ? ` Every data key is under ${c.current}: ${old.join(", ")} can leave the ring.`
        : ` Every data key is under ${c.current}.`
      : "";
    await printResult(
      values.json,
      {
        ok,
        current: c.current,
        rewrapped: c.rewrapped,
        already: c.already,
        gone: c.gone,
        failed: c.failed,
        under: census.keyIds,
      },
      done + after,
    );
    if (ok) return EXIT_OK;
    const left = Object.fromEntries(others);
    note(
      `Data keys are still under other keys (${M.byWhy(left)})${
        Object.keys(c.failed).length > 0 ? `; not rewrapped: ${M.byWhy(c.failed)}` : ""
      }. Put every key that wrapped them in the ring (the current one first), restart the servers with it, and run mcpstate keys rotate again.`,
    );
    return EXIT_FAILURE;
  },
});
