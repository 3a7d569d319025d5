/**
 * `mcpstate delete`: removes one handle.
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
  userOf,
} from "./_common.ts";

const HELP = `Usage: mcpstate delete HANDLE [options]

Deletes a handle and its state (expired or not). It waits in the trash for
7 days, where the state_restore tool (or HandleStore.restore) brings it back;
export first if in doubt.

Options:
  --user USER      Whose handle (default: $MCPSTATE_USER, else "local")
  --json           Print {"ok": true, "handle": …, "deleted": true}
  --backend URL    Backend (default: $MCPSTATE_BACKEND, else sqlite:///~/.mcpstate/state.db)
  -h, --help       Show this help
`;

/** The `delete` subcommand. */
export const del: Command = defineCommand({
  name: "delete",
  summary: "Delete a handle",
  help: HELP,
  options: { ...BACKEND_OPTIONS, user: { type: "string" }, json: { type: "boolean" } },
  positionals: [1, 1],
  async run(values, [handle]) {
    const user = userOf(values.user);
    await using store = await openStore(backendUrl(values.backend));
    await store.revoke(handle!, { user });
    await printResult(
      values.json,
      { ok: true, handle, deleted: true },
      `Deleted ${handle} (user ${JSON.stringify(user)}).`,
    );
    return EXIT_OK;
  },
});
