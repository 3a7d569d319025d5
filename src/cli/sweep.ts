/**
 * `mcpstate sweep`: removes expired records now.
 *
 * @module
 */

import { type Command, defineCommand, EXIT_OK } from "./_command.ts";
import { backendHelp, onlyUser, storeOf, USER_JSON_OPTIONS } from "./_store.ts";
import { printResult } from "./_output.ts";

const HELP = `Usage: mcpstate sweep [options]

Removes every expired record now, grace period or not, and prints how many.
Servers reclaim expired records on their own; sweep is for operators who want
the space back at once. Without --user it sweeps every user ($MCPSTATE_USER is
not consulted).

Options:
  --user USER      Only this user's records
  --json           Print {"removed": N}
${backendHelp()}
`;

/** The `sweep` subcommand. */
export const sweep: Command = defineCommand({
  name: "sweep",
  summary: "Remove expired records now",
  help: HELP,
  options: USER_JSON_OPTIONS,
  async run(values) {
    const user = onlyUser(values.user);
    await using store = await storeOf(values);
    const removed = await store.sweep(user);
    await printResult(
      values.json,
      { removed },
      `Removed ${removed} expired record${removed === 1 ? "" : "s"}${
        user === undefined ? "" : ` of user ${JSON.stringify(user)}`
      }.`,
    );
    return EXIT_OK;
  },
});
