/**
 * `mcpstate export`: every record of every user as JSON Lines.
 *
 * @module
 */

import { dirname } from "node:path";
import { CliFailure, type Command, defineCommand, EXIT_OK, UsageError } from "./_command.ts";
import { strings } from "./_options.ts";
import { BACKEND_OPTIONS, backendHelp, backendUrl, onlyUser, openReadStore } from "./_store.ts";
import { note, println, writeAll } from "./_output.ts";
import { encryptionOption } from "./_keys.ts";
import { Progress } from "./progress.ts";
import { grantLine, recordLine } from "./records.ts";
import { allUsers, countRecords, requireCapability, walkRecords } from "./transfer.ts";

const HELP = `Usage: mcpstate export [options]

Writes every record of every user as JSON Lines: one record per line with
user, handle, kind, version, created_at, updated_at, expires_at, last_writer
and state, exactly as stored (expired records the backend still holds
included), each followed by a line per grant in force on it (who it is
shared with, the alias, the rights). Users and handles come out sorted, so two
exports of the same data are byte-identical. "mcpstate import" reads the file
back.

Options:
  --out FILE       Write to FILE instead of stdout. The file appears only when
                   the export is complete (written beside it, then renamed)
  --user USER      Only this user's records
${backendHelp()}

A progress bar is drawn on stderr when it is a terminal.

Examples:
  mcpstate export --out backup.jsonl
  mcpstate export --backend redis://h:6379/0 | gzip > backup.jsonl.gz
`;

const encoder = new TextEncoder();

/** The `export` subcommand. */
export const exportCommand: Command = defineCommand({
  name: "export",
  summary: "Write every user's records as JSON Lines",
  help: HELP,
  options: { ...BACKEND_OPTIONS, ...strings("out", "user") },
  async run(values) {
    if (values.out === "") throw new UsageError("--out needs a file name.");
    const user = onlyUser(values.user);
    const url = backendUrl(values.backend);
    await using store = await openReadStore(url);
    if (encryptionOption() !== undefined) {
      note(
        "mcpstate export: encryption is on; the export is written in plaintext. Keep it as safe as the keys.",
      );
    }
    let tmp: string | null = null;
    let file: Deno.FsFile | null = null;
    try {
      if (user === undefined) requireCapability(store, url, "users", "export");
      const users = user === undefined ? await allUsers(store) : [user];
      const progress = new Progress("export");
      if (progress.enabled) progress.total = await countRecords(store, users);
      if (values.out !== undefined) {
        tmp = `${values.out}.partial-${crypto.randomUUID().slice(0, 8)}`;
        try {
          file = await Deno.open(tmp, { write: true, createNew: true, mode: 0o600 });
        } catch (e) {
          tmp = null;
          throw new CliFailure(
            `Cannot write in ${JSON.stringify(dirname(values.out))}: ${
              e instanceof Error ? e.message : String(e)
            }.`,
          );
        }
      }
      const sink = file ?? Deno.stdout;
      let buffer = "";
      let records = 0, grants = 0;
      const seenUsers = new Set<string>();
      for await (const item of walkRecords(store, users)) {
        if ("grant" in item) {
          buffer += grantLine(item.grant) + "\n";
          grants++;
          continue;
        }
        const { user, record } = item;
        let line: string;
        try {
          line = recordLine(user, record);
        } catch (e) {
          throw new CliFailure(
            `The record ${record.handle} of user ${JSON.stringify(user)} is damaged (${
              (e as Error).message
            }); the export stopped there${
              values.out === undefined ? "" : " and --out was not written"
            }. Repair or delete that record, then export again.`,
          );
        }
        buffer += line + "\n";
        records++;
        seenUsers.add(user);
        progress.tick();
        if (buffer.length >= 1 << 20) {
          await writeAll(sink, encoder.encode(buffer));
          buffer = "";
        }
      }
      await writeAll(sink, encoder.encode(buffer));
      progress.finish();
      const summary = `Exported ${records.toLocaleString("en-US")} record${
        records === 1 ? "" : "s"
      } of ${seenUsers.size.toLocaleString("en-US")} user${seenUsers.size === 1 ? "" : "s"}${
        grants === 0 ? "" : ` and ${grants.toLocaleString("en-US")} grant${grants === 1 ? "" : "s"}`
      }`;
      if (file && tmp !== null && values.out !== undefined) {
        await file.sync();
        file.close();
        file = null;
        await Deno.rename(tmp, values.out);
        tmp = null;
        await println(`${summary} to ${values.out}.`);
      } else if (Deno.stderr.isTerminal()) {
        note(`${summary}.`);
      }
      return EXIT_OK;
    } finally {
      file?.close();
      if (tmp !== null) await Deno.remove(tmp).catch(() => {});
    }
  },
});
