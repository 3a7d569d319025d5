/**
 * The commands that change who holds a handle: `mcpstate delete` removes
 * one, `mcpstate transfer` hands one over to another user for good, and
 * `mcpstate share` and `mcpstate unshare` grant another user (or anyone
 * holding the alias handle) rights on a handle, and end a grant. (Not to be
 * confused with `transfer.ts`, which moves records between stores for
 * `export`, `import` and `migrate`.)
 *
 * @module
 */

import { grantPayload, type Rights } from "../grants.ts";
import type { HandleStore } from "../store.ts";
import { type Command, defineCommand, EXIT_OK, UsageError } from "./_command.ts";
import { strings } from "./_options.ts";
import { backendHelp, storeOf, USER_JSON_OPTIONS, userOf } from "./_store.ts";
import { printResult } from "./_output.ts";

const DELETE_HELP = `Usage: mcpstate delete HANDLE [options]

Deletes a handle and its state (expired or not). It waits in the trash for
7 days, where the state_restore tool (or HandleStore.restore) brings it back;
export first if in doubt.

Options:
  --user USER      Whose handle (default: $MCPSTATE_USER, else "local")
  --json           Print {"ok": true, "handle": …, "deleted": true}
${backendHelp()}
`;

/** The `delete` subcommand. */
export const del: Command = userCommand(
  "delete",
  "Delete a handle",
  DELETE_HELP,
  async (store, handle, user) => {
    await store.revoke(handle, { user });
    return [
      { ok: true, handle, deleted: true },
      `Deleted ${handle} (user ${JSON.stringify(user)}).`,
    ];
  },
);

const TRANSFER_HELP = `Usage: mcpstate transfer HANDLE --to USER [options]

Hands a handle over to another user for good: its state, version and
history move to USER under the same handle (in one atomic step; on a Redis
Cluster in five steps, finished by the next access after a crash), and the old
owner loses access at once, or keeps a grant with --keep. Grants the old
owner had made on the handle end in the same step. Refused, with nothing
changed, when USER already has a handle of that name.

Options:
  --to USER        Who gets the handle (required)
  --keep RIGHTS    Keep access through a grant of the new owner: read, append,
                   patch or write (the alias handle is printed)
  --user USER      Whose handle it is now (default: $MCPSTATE_USER, else "local")
  --json           Print {"ok": true, "handle": …, "from": …, "to": …, "kept": …}
${backendHelp()}
`;

/** The `transfer` subcommand. */
export const transferHandle: Command = defineCommand({
  name: "transfer",
  summary: "Hand a handle over to another user",
  help: TRANSFER_HELP,
  options: { ...USER_JSON_OPTIONS, ...strings("to", "keep") },
  positionals: [1, 1],
  async run(values, [handle]) {
    const user = userOf(values.user);
    const to = values.to;
    if (typeof to !== "string" || to.length === 0) {
      throw new UsageError("transfer needs --to USER: the user who gets the handle.");
    }
    const keep = values.keep;
    await using store = await storeOf(values);
    const moved = await store.transfer(handle!, {
      user,
      to,
      ...(keep === undefined ? {} : { keep }),
    });
    // The kept grant is the new owner's only grant on the handle right after the move.
    const kept = keep === undefined
      ? undefined
      : (await store.grants(moved, { user: to })).find((g) => g.to === user);
    await printResult(
      values.json,
      { ok: true, handle: moved, from: user, to, ...(kept ? { kept: grantPayload(kept) } : {}) },
      `Transferred ${moved} from ${JSON.stringify(user)} to ${JSON.stringify(to)}.${
        kept ? ` ${JSON.stringify(user)} keeps ${kept.rights} access through ${kept.handle}.` : ""
      }`,
    );
    return EXIT_OK;
  },
});

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
  options: { ...USER_JSON_OPTIONS, ...strings("to", "rights", "ttl-days") },
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
export const unshare: Command = userCommand(
  "unshare",
  "End a grant and every re-share under it",
  UNSHARE_HELP,
  async (store, grant, user) => {
    const ended = await store.unshare(grant, { user });
    return [
      { ok: true, grant, ended },
      `Ended ${grant} (${ended} grant${ended === 1 ? "" : "s"}).`,
    ];
  },
);

/**
 * A command on one argument, acting as `--user` on the store of `--backend`:
 * `act` answers the JSON of `--json` and the line printed without it.
 */
function userCommand(
  name: string,
  summary: string,
  help: string,
  act: (store: HandleStore, arg: string, user: string) => Promise<[json: unknown, text: string]>,
): Command {
  return defineCommand({
    name,
    summary,
    help,
    options: USER_JSON_OPTIONS,
    positionals: [1, 1],
    async run(values, [arg]) {
      const user = userOf(values.user);
      await using store = await storeOf(values);
      const [json, text] = await act(store, arg!, user);
      await printResult(values.json, json, text);
      return EXIT_OK;
    },
  });
}
