/**
 * `mcpstate sweep`: removes expired records now.
 *
 * @module
 */

import {
  BACKEND_OPTIONS,
  backendUrl,
  type Command,
  EXIT_OK,
  openStore,
  parse,
  printJson,
  println,
  UsageError,
} from "./_common.ts";

const HELP = `Usage: mcpstate sweep [options]

Removes every expired record now, grace period or not, and prints how many.
Servers reclaim expired records on their own; sweep is for operators who want
the space back at once. Without --user it sweeps every user ($MCPSTATE_USER is
not consulted).

Options:
  --user USER      Only this user's records
  --json           Print {"removed": N}
  --backend URL    Backend (default: $MCPSTATE_BACKEND, else sqlite:///~/.mcpstate/state.db)
  -h, --help       Show this help
`;

const OPTIONS = {
  ...BACKEND_OPTIONS,
  user: { type: "string" },
  json: { type: "boolean" },
} as const;

/** The `sweep` subcommand. */
export const sweep: Command = {
  name: "sweep",
  summary: "Remove expired records now",
  help: HELP,
  async run(args: string[]): Promise<number> {
    const { values } = parse("sweep", args, OPTIONS);
    if (values.help) {
      await println(HELP.trimEnd());
      return EXIT_OK;
    }
    if (values.user === "") throw new UsageError("--user needs a non-empty user name.");
    await using store = await openStore(backendUrl(values.backend));
    const removed = await store.sweep(values.user);
    if (values.json) await printJson({ removed });
    else {
      await println(
        `Removed ${removed} expired record${removed === 1 ? "" : "s"}${
          values.user === undefined ? "" : ` of user ${JSON.stringify(values.user)}`
        }.`,
      );
    }
    return EXIT_OK;
  },
};
