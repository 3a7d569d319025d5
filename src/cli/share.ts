/**
 * `mcpstate share` and `mcpstate unshare`: grant another user (or anyone
 * holding the alias handle) rights on a handle, and end a grant.
 *
 * @module
 */

import { grantPayload, type Rights } from "../grants.ts";
import {
  BACKEND_OPTIONS,
  backendHelp,
  type Command,
  defineCommand,
  EXIT_OK,
  printResult,
  storeOf,
  USER_JSON_OPTIONS,
  userOf,
} from "./_common.ts";

const SHARE_HELP = `Usage: mcpstate share HANDLE --to USER|"*" --rights RIGHTS [options]

Shares a handle: USER (or, with --to "*", anyone who holds the printed alias
handle) may use the alias with RIGHTS: read, append (read + patches that only
append, add to a set or increment), patch (read + any patch) or write (patch +
save and touch). Run on an alias you hold, it re-shares with rights and expiry
no wider than your own. Prints the alias handle and the grant id.

Options:
  --to USER        The grantee's user id, or "*" for anyone holding the alias
  --rights RIGHTS  read | append | patch | write
  --ttl-days N     Days until the grant lapses (default: never; a re-share: its grant's expiry)
  --user USER      Who shares (default: $MCPSTATE_USER, else "local")
  --json           Print {"ok": true, "grant": …, "handle": …, "rights": …, "to": …, "expires_at": …}
${backendHelp()}
`;

const UNSHARE_HELP = `Usage: mcpstate unshare GRANT|ALIAS [options]

Ends a grant and every re-share made under it, at once: no read or write
through them succeeds after this returns. The owner of the handle, or whoever
made the re-share, may end it.

Options:
  --user USER      Who ends it (default: $MCPSTATE_USER, else "local")
  --json           Print {"ok": true, "grant": …, "ended": N}
${backendHelp()}
`;

/** The `share` subcommand. */
export const share: Command = defineCommand({
  name: "share",
  summary: "Share a handle with a user (or anyone holding its alias)",
  help: SHARE_HELP,
  options: {
    ...BACKEND_OPTIONS,
    user: { type: "string" },
    to: { type: "string" },
    rights: { type: "string" },
    "ttl-days": { type: "string" },
    json: { type: "boolean" },
  },
  positionals: [1, 1],
  async run(values, [handle]) {
    const user = userOf(values.user);
    const ttl = values["ttl-days"];
    await using store = await storeOf(values);
    const g = await store.share(handle!, {
      user,
      to: values.to as string,
      rights: values.rights as Rights,
      ...(ttl === undefined ? {} : { ttlDays: Number(ttl) }),
    });
    const until = g.expiresAt ? ` until ${g.expiresAt.toISOString()}` : "";
    await printResult(
      values.json,
      { ok: true, ...grantPayload(g) },
      `Shared ${handle} with ${
        g.to === "*" ? "anyone holding the alias" : JSON.stringify(g.to)
      } (${g.rights}${until}).\nAlias handle: ${g.handle}\nGrant: ${g.grant}`,
    );
    return EXIT_OK;
  },
});

/** The `unshare` subcommand. */
export const unshare: Command = defineCommand({
  name: "unshare",
  summary: "End a grant and every re-share under it",
  help: UNSHARE_HELP,
  options: USER_JSON_OPTIONS,
  positionals: [1, 1],
  async run(values, [grant]) {
    const user = userOf(values.user);
    await using store = await storeOf(values);
    const ended = await store.unshare(grant!, { user });
    await printResult(
      values.json,
      { ok: true, grant, ended },
      `Ended ${grant} (${ended} grant${ended === 1 ? "" : "s"}).`,
    );
    return EXIT_OK;
  },
});
