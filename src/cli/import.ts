/**
 * `mcpstate import`: restores JSON Lines written by `mcpstate export`, every
 * field exactly, verified record by record.
 *
 * The whole input is validated before anything is written: a corrupt line
 * stops the import with its line number and the backend untouched. Records
 * are then written one atomic restore at a time, each only where the backend
 * has no such handle or an older version of it, so an interrupted import
 * leaves whole records only, and running it again completes it without
 * duplicating or overwriting anything newer.
 *
 * @module
 */

import type { HandleStore } from "../store.ts";
import { CliFailure, type Command, defineCommand, positiveInt, UsageError } from "./_command.ts";
import { flags, strings } from "./_options.ts";
import { BACKEND_OPTIONS, backendHelp, backendUrl, openStore } from "./_store.ts";
import { Progress } from "./progress.ts";
import { CorruptLine, type ExportLine, parseLine, readLines } from "./records.ts";
import { requireCapability, transfer } from "./transfer.ts";

const HELP = `Usage: mcpstate import [FILE|-] [options]

Reads JSON Lines written by "mcpstate export" (from FILE, or stdin when FILE is
"-" or absent) and writes every record exactly as it was: handle, kind,
version, timestamps, expiry, writer and state, for every user in the file.

Safe to re-run: a record is written only where the backend has no such handle
or an older version of it; a newer record in the backend is kept. Every
written record is read back and compared by SHA-256. Grants in force on a
handle (lines written by export after the handle's record) are written after
every record, as they were; one that ended meanwhile is not. The whole input is
validated first: a corrupt line stops the import, naming the line, with
nothing written (input from stdin is held in memory for that; pass a FILE for
very large imports). Records that expired more than 7 days ago are skipped.

Options:
  --check                  Compare the file with the backend; write nothing
  --rate N                 Write at most N records per second
  --max-state-bytes N      Largest state accepted (default: $MCPSTATE_MAX_STATE_BYTES, else 1048576)
  --json                   Print the summary as JSON
${backendHelp(25)}

A progress bar is drawn on stderr when it is a terminal. Exit code 1 when a
record did not verify (the summary says which).

Examples:
  mcpstate import backup.jsonl --backend redis://h:6379/0
  gunzip -c backup.jsonl.gz | mcpstate import -
`;

/** The `import` subcommand. */
export const importCommand: Command = defineCommand({
  name: "import",
  summary: "Restore JSON Lines from export, exactly and verified",
  help: HELP,
  options: { ...BACKEND_OPTIONS, ...strings("rate", "max-state-bytes"), ...flags("check", "json") },
  positionals: [0, 1],
  async run(values, positionals) {
    const rate = values.rate === undefined ? undefined : positiveInt("--rate", values.rate);
    const maxBytes = maxStateBytes(values["max-state-bytes"]);
    const path = positionals[0] === undefined || positionals[0] === "-" ? null : positionals[0];
    if (path === null && Deno.stdin.isTerminal()) {
      throw new UsageError(
        'import reads JSON Lines from stdin: pass a FILE, or pipe an export in ("mcpstate export | mcpstate import --backend URL").',
      );
    }
    const url = backendUrl(values.backend);
    const check = values.check ?? false;
    await using store = await openStore(
      url,
      maxBytes === undefined ? {} : { maxStateBytes: maxBytes },
    );
    if (!check) requireCapability(store, url, "importRecord", "import");
    // Pass 1: validate everything before writing anything.
    const before = path === null ? null : await statOf(path);
    const kept: ExportLine[] | null = path === null ? [] : null;
    let total = 0;
    for await (const rec of records(path, store)) {
      if (!("grant" in rec)) total++;
      kept?.push(rec);
    }
    // Pass 2: write (a file is read again rather than held in memory).
    if (path !== null) {
      const after = await statOf(path);
      if (after.size !== before?.size || after.mtime !== before.mtime) {
        throw new CliFailure(
          `${path} changed while it was being read; nothing was imported. Run the import again.`,
        );
      }
    }
    return await transfer(store, kept ? fromArray(kept) : records(path, store), {
      check,
      rate,
      progress: new Progress(check ? "check" : "import", { total }),
      json: values.json,
      command: "import",
      verb: "Imported",
      whenMissing:
        "of the file are missing or older in the backend; run without --check to write them",
    });
  },
});

async function* records(path: string | null, store: HandleStore): AsyncGenerator<ExportLine> {
  let file: Deno.FsFile | null = null;
  if (path !== null) {
    try {
      file = await Deno.open(path, { read: true });
    } catch (e) {
      throw new CliFailure(`Cannot read ${path}: ${e instanceof Error ? e.message : String(e)}.`);
    }
  }
  try {
    for await (const { no, text } of readLines(file ? file.readable : Deno.stdin.readable)) {
      if (text.trim() === "") continue;
      yield parseLine(text, no, store);
    }
  } catch (e) {
    if (e instanceof CorruptLine) {
      throw new CliFailure(
        `${e.message} Nothing was imported; fix or remove that line and run the import again.`,
      );
    }
    throw e;
  } finally {
    try {
      file?.close();
    } catch { /* the stream closed it */ }
  }
}

async function* fromArray(list: ExportLine[]): AsyncGenerator<ExportLine> {
  yield* list;
}

async function statOf(path: string): Promise<{ size: number; mtime: number | null }> {
  try {
    const s = await Deno.stat(path);
    return { size: s.size, mtime: s.mtime?.getTime() ?? null };
  } catch (e) {
    throw new CliFailure(`Cannot read ${path}: ${e instanceof Error ? e.message : String(e)}.`);
  }
}

/**
 * The state size cap: `--max-state-bytes`, else `MCPSTATE_MAX_STATE_BYTES`,
 * else `undefined` (the store's default).
 *
 * @param flag The option's value, if given.
 * @returns The cap in bytes, if set.
 */
export function maxStateBytes(flag: string | undefined): number | undefined {
  if (flag !== undefined) return positiveInt("--max-state-bytes", flag);
  const env = Deno.env.get("MCPSTATE_MAX_STATE_BYTES");
  if (env !== undefined && env !== "") return positiveInt("MCPSTATE_MAX_STATE_BYTES", env);
  return undefined;
}
