/**
 * `mcpstate transfer`: hands one handle over to another user for good.
 * (Not to be confused with `transfer.ts`, which moves records between
 * stores for `export`, `import` and `migrate`.)
 *
 * @module
 */

import {
  BACKEND_OPTIONS,
  backendUrl,
  type Command,
  defineCommand,
  EXIT_OK,
  openStore,
  printResult,
  UsageError,
  userOf,
} from "./_common.ts";

const HELP = `Usage: mcpstate transfer HANDLE --to USER [options]

Hands a handle over to another user for good: its state, version and
history move to USER under the same handle, in one atomic step, and the old
owner loses access at once. Refused, with nothing changed, when USER already
has a handle of that name.

Options:
  --to USER        Who gets the handle (required)
  --user USER      Whose handle it is now (default: $MCPSTATE_USER, else "local")
  --json           Print {"ok": true, "handle": …, "from": …, "to": …}
  --backend URL    Backend (default: $MCPSTATE_BACKEND, else sqlite:///~/.mcpstate/state.db)
  -h, --help       Show this help
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
    json: { type: "boolean" },
  },
  positionals: [1, 1],
  async run(values, [handle]) {
    const user = userOf(values.user);
    const to = values.to;
    if (typeof to !== "string" || to.length === 0) {
      throw new UsageError("transfer needs --to USER: the user who gets the handle.");
    }
    await using store = await openStore(backendUrl(values.backend));
    const moved = await store.transfer(handle!, { user, to });
    await printResult(
      values.json,
      { ok: true, handle: moved, from: user, to },
      `Transferred ${moved} from ${JSON.stringify(user)} to ${JSON.stringify(to)}.`,
    );
    return EXIT_OK;
  },
});
