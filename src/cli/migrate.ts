/**
 * `mcpstate migrate`: copies every user's records from one backend to
 * another, exactly, resumably and verified.
 *
 * @module
 */

import type { HandleStore } from "../store.ts";
import { type Command, defineCommand, positiveInt, UsageError } from "./_command.ts";
import { flags, strings } from "./_options.ts";
import { onlyUser, openStore } from "./_store.ts";
import { Progress } from "./progress.ts";
import { allUsers, countRecords, requireCapability, transfer, walkRecords } from "./transfer.ts";

const HELP = `Usage: mcpstate migrate --from URL --to URL [options]

Copies every user's records from one backend to another, every field exactly
as stored (handle, kind, version, timestamps, expiry, writer, state). Each
copied record is read back from the target and compared by SHA-256.

Resumable: a record is written only where the target has no such handle or
an older version of it, in one atomic step per record. After an interruption
(Ctrl-C, a crash, a lost connection) run the same command again: what was
copied is found identical and skipped, nothing is duplicated, and nothing newer
in the target is overwritten. Records that expired more than 7 days ago are
skipped. The source is only read.

Stop the servers that write to the source first (or run migrate again after
switching them over) so that late writes are carried too.

Options:
  --from URL       Source backend (read only)
  --to URL         Target backend
  --user USER      Only this user's records
  --check          Compare source and target; write nothing (exit 1 if they differ)
  --rate N         Write at most N records per second (spare a busy target)
  --json           Print the summary as JSON
  -h, --help       Show this help

A progress bar with rate and ETA is drawn on stderr when it is a terminal.

Example (one machine is no longer enough: SQLite to Redis):
  mcpstate migrate --from sqlite:///~/.mcpstate/state.db --to redis://redis.internal:6379/0
`;

/** The `migrate` subcommand. */
export const migrate: Command = defineCommand({
  name: "migrate",
  summary: "Copy every user's records to another backend, verified and resumable",
  help: HELP,
  options: { ...strings("from", "to", "user", "rate"), ...flags("check", "json") },
  async run(values) {
    const from = values.from, to = values.to;
    if (!from || !to) {
      throw new UsageError(
        'migrate needs both --from URL and --to URL. Run "mcpstate migrate --help".',
      );
    }
    if (from === to) throw new UsageError("--from and --to name the same backend; nothing to do.");
    const user = onlyUser(values.user);
    const rate = values.rate === undefined ? undefined : positiveInt("--rate", values.rate);
    const check = values.check ?? false;
    let source: HandleStore | null = null, target: HandleStore | null = null;
    try {
      source = await openStore(from);
      // Records move as they are stored: the source's store already held each
      // state to its own size cap, which may be larger than the default.
      target = await openStore(to, { maxStateBytes: Number.MAX_SAFE_INTEGER });
      if (user === undefined) requireCapability(source, from, "users", "migrate");
      if (!check) requireCapability(target, to, "importRecord", "migrate");
      const users = user === undefined ? await allUsers(source) : [user];
      const progress = new Progress(check ? "check" : "migrate");
      if (progress.enabled) progress.total = await countRecords(source, users);
      return await transfer(target, walkRecords(source, users), {
        check,
        rate,
        progress,
        json: values.json,
        command: "migrate",
        verb: "Migrated",
        whenMissing: "are missing or older in the target; run without --check to copy them",
      });
    } finally {
      await source?.close();
      await target?.close();
    }
  },
});
