/**
 * `mcpstate delete`: removes one handle.
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
  userOf,
} from "./_common.ts";

const HELP = `Usage: mcpstate delete HANDLE [options]

Deletes a handle and its state (expired or not). There is no undo: export
first if in doubt.

Options:
  --user USER      Whose handle (default: $MCPSTATE_USER, else "local")
  --json           Print {"ok": true, "handle": …, "deleted": true}
  --backend URL    Backend (default: $MCPSTATE_BACKEND, else sqlite:///~/.mcpstate/state.db)
  -h, --help       Show this help
`;

const OPTIONS = {
  ...BACKEND_OPTIONS,
  user: { type: "string" },
  json: { type: "boolean" },
} as const;

/** The `delete` subcommand. */
export const del: Command = {
  name: "delete",
  summary: "Delete a handle",
  help: HELP,
  async run(args: string[]): Promise<number> {
    const { values, positionals } = parse("delete", args, OPTIONS, [1, 1]);
    if (values.help) {
      await println(HELP.trimEnd());
      return EXIT_OK;
    }
    const handle = positionals[0] as string;
    const user = userOf(values.user);
    await using store = await openStore(backendUrl(values.backend));
    await store.revoke(handle, { user });
    if (values.json) await printJson({ ok: true, handle, deleted: true });
    else await println(`Deleted ${handle} (user ${JSON.stringify(user)}).`);
    return EXIT_OK;
  },
};
