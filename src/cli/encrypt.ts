/**
 * `mcpstate encrypt` (SPEC 9.2): seals an existing store's plaintext in
 * place while its servers keep running: every stored copy of state
 * content — records live, expired and in the trash, changelog entries, the
 * results kept for idempotency keys — under its user's data key. Each copy
 * is rewritten by one compare-and-set, so a write that lands meanwhile wins
 * and the copy is tried again; a run stopped at any point leaves every copy
 * whole, and the next run finishes. Exit 1 while plaintext is left.
 *
 * @module
 */

import { COPY_KINDS, type EncryptCounts } from "../store/_encrypt.ts";
import { type Command, defineCommand, EXIT_FAILURE, EXIT_OK } from "./_command.ts";
import {
  byWhy,
  counted,
  keyedStore,
  MAINTAIN_OPTIONS,
  maintainHelp,
  runOptions,
} from "./_maintain.ts";
import { note, printResult } from "./_output.ts";
import { backendHelp } from "./_store.ts";

const HELP = `Usage: mcpstate encrypt [options]

Encrypts an existing store's plaintext in place, with the encryption keys
(MCPSTATE_ENCRYPTION_KEYS or --encryption-keys-file; new data keys are
wrapped by the first): every stored copy of state content — handles live,
expired and in the trash, their histories, the results kept for idempotency
keys — under its user's data key. Entries of share, unshare and transfer,
which hold no state content, stay clear.

Online and resumable: servers keep running (restart them with the same keys
first, so that what they write is encrypted; until a handle is encrypted a
server with keys answers it encryption_error "plaintext"). Each copy is
rewritten in one atomic compare-and-set; a write that lands meanwhile wins
and the copy is encrypted again from it. Stop it at any point and run it
again: it skips what is done. It makes passes until one finds no plaintext.
Exit code 1 while plaintext is left.

Options:
${maintainHelp('Print {"ok": …, "encrypted": {records, trash, entries, results}, …}')}
${backendHelp()}

A progress line is drawn on stderr when it is a terminal. "mcpstate doctor"
counts the plaintext left.
`;

/** Copies encrypted, in words: `3 records, 1 in the trash, …`. */
function sealedText(c: EncryptCounts): string {
  const words = {
    record: ["record", "records"],
    trash: ["in the trash", "in the trash"],
    entry: ["changelog entry", "changelog entries"],
    result: ["idempotency result", "idempotency results"],
  } as const;
  return COPY_KINDS.map((k) => {
    const [one, many] = words[k];
    return k === "trash"
      ? `${c.sealed[k].toLocaleString("en-US")} ${one}`
      : counted(c.sealed[k], one, many);
  }).join(", ");
}

/** The `encrypt` subcommand. */
export const encrypt: Command = defineCommand({
  name: "encrypt",
  summary: "Encrypt a store's plaintext in place, online and resumable",
  help: HELP,
  options: MAINTAIN_OPTIONS,
  async run(values) {
    await using store = await keyedStore(values, "encrypt");
    const { options, finish } = runOptions(values, "encrypt", "copies encrypted");
    let c: EncryptCounts;
    try {
      c = await store.maintenance.encrypt(options);
    } finally {
      finish();
    }
    const total = COPY_KINDS.reduce((a, k) => a + c.sealed[k], 0);
    const { record: records, trash, entry: entries, result: results } = c.sealed;
    const rest = [
      c.already > 0 ? `${counted(c.already, "copy was", "copies were")} encrypted already` : "",
      c.clear > 0
        ? `${counted(c.clear, "share/unshare/transfer entry", "share/unshare/transfer entries")} ` +
          "hold no state content and stay clear"
        : "",
    ].filter((x) => x !== "");
    const text = total === 0
      ? `Nothing to encrypt${rest.length > 0 ? `: ${rest.join("; ")}` : ""}.`
      : `Encrypted ${counted(total, "stored copy", "stored copies")} (${sealedText(c)})${
        rest.length > 0 ? `; ${rest.join("; ")}` : ""
      }.`;
    await printResult(
      values.json,
      {
        ok: c.left === 0,
        encrypted: { records, trash, entries, results, total },
        already: c.already,
        clear: c.clear,
        gone: c.gone,
        failed: c.failed,
        left: c.left,
        passes: c.passes,
      },
      text,
    );
    if (c.left === 0) return EXIT_OK;
    const failed = Object.values(c.failed).reduce((a, n) => a + n, 0);
    if (failed > 0) {
      note(
        `${
          counted(failed, "copy", "copies")
        } could not be encrypted: their users' data keys are under keys this ring lacks, or do not open (${
          byWhy(c.failed)
        }). Add those keys to the ring and run mcpstate encrypt again.`,
      );
    }
    if (c.left > failed) {
      note(
        `Plaintext kept appearing in ${c.passes} passes: a server without the keys is still writing. Restart every server with the keys, then run mcpstate encrypt again.`,
      );
    }
    return EXIT_FAILURE;
  },
});
