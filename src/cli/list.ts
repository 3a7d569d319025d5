/**
 * `mcpstate list`: a user's handles as a table for people, or JSON for
 * scripts.
 *
 * @module
 */

import type { HandleStore } from "../store.ts";
import type { HandleInfo } from "../types.ts";
import { toPayload } from "../wire.ts";
import { type Command, defineCommand, EXIT_OK, UsageError } from "./_command.ts";
import { flags, strings } from "./_options.ts";
import { backendHelp, backendUrl, openReadStore, USER_JSON_OPTIONS, userOf } from "./_store.ts";
import { printJson, println, shortTime, table } from "./_output.ts";
import { allUsers, requireCapability } from "./transfer.ts";
import { usageLine } from "./_usage.ts";

const HELP = `Usage: mcpstate list [options]

Lists one user's handles (metadata only, never states), newest first, then
the user's usage (handles, bytes of state, writes this minute) beside the
quotas set in MCPSTATE_QUOTA_HANDLES, MCPSTATE_QUOTA_BYTES and
MCPSTATE_QUOTA_WRITES_PER_MINUTE.

Options:
  --user USER          Whose handles (default: $MCPSTATE_USER, else "local")
  --all-users          Every user's handles, with a USER column
  --kind KIND          Only handles of this kind
  --include-expired    Include expired handles still in their grace period
  --json               Print a JSON array (wire form: snake_case, ISO-8601 times)
${backendHelp(21)}

Examples:
  mcpstate list
  mcpstate list --user alice --kind research --json | jq '.[].handle'
`;

/** The `list` subcommand. */
export const list: Command = defineCommand({
  name: "list",
  summary: "List a user's handles (table, or --json)",
  help: HELP,
  options: { ...USER_JSON_OPTIONS, ...strings("kind"), ...flags("all-users", "include-expired") },
  async run(values) {
    if (values["all-users"] && values.user !== undefined) {
      throw new UsageError("Pass either --user or --all-users, not both.");
    }
    const url = backendUrl(values.backend);
    await using store = await openReadStore(url);
    const options = {
      ...(values.kind === undefined ? {} : { kind: values.kind }),
      includeExpired: values["include-expired"] ?? false,
    };
    const rows: { user: string; info: HandleInfo }[] = [];
    const users = values["all-users"] ? await everyUser(store, url) : [userOf(values.user)];
    for (const user of users) {
      for (const info of await store.list(user, options)) rows.push({ user, info });
    }
    if (values.json) {
      await printJson(rows.map(({ user, info }) => {
        const payload = toPayload(info);
        return values["all-users"] ? { user, ...payload } : payload;
      }));
      return EXIT_OK;
    }
    const usage = values["all-users"] ? undefined : await usageLine(store, users[0]!);
    if (rows.length === 0) {
      await println(
        values["all-users"] ? "No handles." : `No handles for user ${JSON.stringify(users[0])}.`,
      );
      if (usage) await println(`Usage: ${usage}`);
      return EXIT_OK;
    }
    const header = ["HANDLE", "KIND", "VERSION", "UPDATED", "EXPIRES", "WRITER"];
    const body = rows.map(({ user, info }) => {
      const expires = info.expiresAt?.getTime() ?? null;
      const cells = [
        info.handle,
        info.kind,
        String(info.version),
        shortTime(info.updatedAt.getTime()),
        expires === null
          ? "never"
          : `${shortTime(expires)}${store.isExpired(info) ? " (expired)" : ""}`,
        info.lastWriter ?? "-",
      ];
      return values["all-users"] ? [user, ...cells] : cells;
    });
    await println(table(values["all-users"] ? ["USER", ...header] : header, body));
    if (usage) await println(`Usage: ${usage}`);
    return EXIT_OK;
  },
});

async function everyUser(store: HandleStore, url: string): Promise<string[]> {
  requireCapability(store, url, "users", "list --all-users");
  return await allUsers(store);
}
