/**
 * `mcpstate get`: one handle's snapshot (or a subtree of its state) as JSON.
 *
 * @module
 */

import { PatchError } from "../errors.ts";
import { getPath } from "../ops.ts";
import { toPayload } from "../wire.ts";
import { CliFailure, type Command, defineCommand, EXIT_OK } from "./_command.ts";
import { strings } from "./_options.ts";
import { BACKEND_OPTIONS, backendHelp, backendUrl, openReadStore, userOf } from "./_store.ts";
import { printJson } from "./_output.ts";

const HELP = `Usage: mcpstate get HANDLE [options]

Prints a handle's snapshot as JSON: handle, kind, version, created_at,
updated_at, expires_at, last_writer and state.

Options:
  --path PATH      Only this part of the state: dotted ("profile.tags") or a
                   JSON Pointer ("/profile/tags/0"); the output gains "path"
  --user USER      Whose handle (default: $MCPSTATE_USER, else "local")
${backendHelp()}

Examples:
  mcpstate get research_k3v9x2mq
  mcpstate get research_k3v9x2mq --path notes | jq -r .state
`;

/** The `get` subcommand. */
export const get: Command = defineCommand({
  name: "get",
  summary: "Print a handle's snapshot as JSON (--path for a part)",
  help: HELP,
  options: { ...BACKEND_OPTIONS, ...strings("user", "path") },
  positionals: [1, 1],
  async run(values, positionals) {
    const handle = positionals[0] as string;
    const user = userOf(values.user);
    await using store = await openReadStore(backendUrl(values.backend));
    const snap = await store.get(handle, { user });
    const payload = toPayload(snap);
    if (values.path !== undefined) {
      payload.path = values.path;
      try {
        payload.state = getPath(snap.state, values.path);
      } catch (e) {
        if (!(e instanceof PatchError)) throw e;
        throw new CliFailure(
          `The path ${
            JSON.stringify(values.path)
          } does not exist in the state of ${handle}. Run "mcpstate get ${handle}" to see its shape.`,
        );
      }
    }
    await printJson(payload);
    return EXIT_OK;
  },
});
