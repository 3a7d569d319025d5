/**
 * `mcpstate erase --user U [--yes]` (SPEC 9.1): removes every trace of one
 * user from the backend. Without `--yes` it only counts what would go and
 * exits 1, so that a script that forgot the flag erases nothing.
 *
 * @module
 */

import { type Command, defineCommand, EXIT_FAILURE, EXIT_OK, UsageError } from "./_command.ts";
import { note, printResult } from "./_output.ts";
import { backendHelp, onlyUser, storeOf, USER_JSON_OPTIONS } from "./_store.ts";

const ERASE_HELP = `Usage: mcpstate erase --user USER [--yes] [options]

Removes every trace of USER from the backend: its handles live, expired and
in the trash, with their histories and previews, its idempotency keys,
leases and usage, the grants on its handles (re-shares included), the grants
made to it and those it made. Entries USER left in other users' histories
(as writer, or through a grant) are theirs and stay. Without --yes, prints
what it would remove and exits 1, changing nothing.

Options:
  --user USER      The user to erase (required; $MCPSTATE_USER is not read)
  --yes            Erase; without it, only count
  --json           Print {"ok": …, "erased": …, "user": …, "handles": N, "grants": N}
${backendHelp()}
`;

/** `N thing` or `N things`. */
function count(n: number, thing: string): string {
  return `${n} ${thing}${n === 1 ? "" : "s"}`;
}

/** The `erase` subcommand. */
export const erase: Command = defineCommand({
  name: "erase",
  summary: "Erase every trace of a user (asks for --yes)",
  help: ERASE_HELP,
  options: { ...USER_JSON_OPTIONS, yes: { type: "boolean" } },
  async run(values) {
    const user = onlyUser(values.user);
    if (user === undefined) {
      throw new UsageError("erase needs --user USER: the user whose every record goes.");
    }
    const yes = values.yes === true;
    await using store = await storeOf(values);
    const counts = await store.erase(user, { dryRun: !yes });
    const what = `${count(counts.handles, "handle")} and ${count(counts.grants, "grant")}`;
    await printResult(
      values.json,
      { ok: yes, erased: yes, user, ...counts },
      yes
        ? `Erased user ${JSON.stringify(user)}: ${what}.`
        : `Would erase user ${JSON.stringify(user)}: ${what}.`,
    );
    if (yes) return EXIT_OK;
    note("Nothing was changed. Run again with --yes to erase.");
    return EXIT_FAILURE;
  },
});
