/**
 * `mcpstate transfer`: hands one handle over to another user for good.
 * (Not to be confused with `transfer.ts`, which moves records between
 * stores for `export`, `import` and `migrate`.)
 *
 * @module
 */

import { grantPayload } from "../grants.ts";
import {
  BACKEND_OPTIONS,
  backendHelp,
  type Command,
  defineCommand,
  EXIT_OK,
  printResult,
  storeOf,
  UsageError,
  userOf,
} from "./_common.ts";

const HELP = `Usage: mcpstate transfer HANDLE --to USER [options]

Hands a handle over to another user for good: its state, version and
history move to USER under the same handle (in one atomic step; on a Redis
Cluster in five steps, finished by the next access after a crash), and the old
owner loses access at once, or keeps a grant with --keep. Grants the old
owner had made on the handle end in the same step. Refused, with nothing
changed, when USER already has a handle of that name.

Options:
  --to USER        Who gets the handle (required)
  --keep RIGHTS    Keep access through a grant of the new owner: read, append,
                   patch or write (the alias handle is printed)
  --user USER      Whose handle it is now (default: $MCPSTATE_USER, else "local")
  --json           Print {"ok": true, "handle": …, "from": …, "to": …, "kept": …}
${backendHelp()}
`;

/** The `transfer` subcommand. */
export const transferHandle: Command = defineCommand({
  name: "transfer",
  summary: "Hand a handle over to another user",
  help: HELP,
  options: {
    ...BACKEND_OPTIONS,
    user: { type: "string" },
    to: { type: "string" },
    keep: { type: "string" },
    json: { type: "boolean" },
  },
  positionals: [1, 1],
  async run(values, [handle]) {
    const user = userOf(values.user);
    const to = values.to;
    if (typeof to !== "string" || to.length === 0) {
      throw new UsageError("transfer needs --to USER: the user who gets the handle.");
    }
    const keep = values.keep;
    await using store = await storeOf(values);
    const moved = await store.transfer(handle!, {
      user,
      to,
      ...(keep === undefined ? {} : { keep }),
    });
    // The kept grant is the new owner's only grant on the handle right after the move.
    const kept = keep === undefined
      ? undefined
      : (await store.grants(moved, { user: to })).find((g) => g.to === user);
    await printResult(
      values.json,
      { ok: true, handle: moved, from: user, to, ...(kept ? { kept: grantPayload(kept) } : {}) },
      `Transferred ${moved} from ${JSON.stringify(user)} to ${JSON.stringify(to)}.${
        kept ? ` ${JSON.stringify(user)} keeps ${kept.rights} access through ${kept.handle}.` : ""
      }`,
    );
    return EXIT_OK;
  },
});
