/**
 * `mcpstate delete`: removes one handle.
 *
 * @module
 */

import {
  backendHelp,
  type Command,
  defineCommand,
  EXIT_OK,
  printResult,
  storeOf,
  USER_JSON_OPTIONS,
  userOf,
} from "./_common.ts";

const HELP = `Usage: mcpstate delete HANDLE [options]

Deletes a handle and its state (expired or not). It waits in the trash for
7 days, where the state_restore tool (or HandleStore.restore) brings it back;
export first if in doubt.

Options:
  --user USER      Whose handle (default: $MCPSTATE_USER, else "local")
  --json           Print {"ok": true, "handle": …, "deleted": true}
${backendHelp()}
`;

/** The `delete` subcommand. */
export const del: Command = defineCommand({
  name: "delete",
  summary: "Delete a handle",
  help: HELP,
  options: USER_JSON_OPTIONS,
  positionals: [1, 1],
  async run(values, [handle]) {
    const user = userOf(values.user);
    await using store = await storeOf(values);
    await store.revoke(handle!, { user });
    await printResult(
      values.json,
      { ok: true, handle, deleted: true },
      `Deleted ${handle} (user ${JSON.stringify(user)}).`,
    );
    return EXIT_OK;
  },
});
