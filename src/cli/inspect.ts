/**
 * `mcpstate inspect`: serves the web inspector (`src/inspect/`) for one user
 * on a loopback port and prints one line, its URL with a one-time token,
 * then serves until SIGINT or SIGTERM. Read-only unless `--write` (restore
 * an earlier version as a new save, or a handle from the trash); its writes
 * carry the writer label `inspect/<hostname>`.
 *
 * @module
 */

import { redact } from "../errors.ts";
import { serveInspector } from "../inspect/server.ts";
import { machineName } from "../server/identity.ts";
import { CliFailure, type Command, defineCommand, EXIT_OK, UsageError } from "./_command.ts";
import { flags, strings } from "./_options.ts";
import {
  BACKEND_OPTIONS,
  backendHelp,
  backendUrl,
  missingFile,
  openStore,
  userOf,
} from "./_store.ts";
import { note, println } from "./_output.ts";

const HELP = `Usage: mcpstate inspect [options]

Serves a web page on 127.0.0.1 that shows one user's handles, each state as a
tree, each handle's history as a timeline of diffs, and the trash; it follows
writes from other processes as they land. Prints one line, the URL to open,
which carries a one-time token: the first visit trades it for a session cookie,
and anything else is refused. Read-only unless --write, which allows restoring
an earlier version as a new save and a handle from the trash. Ctrl-C stops it.

Options:
  --user USER      Whose handles (default: $MCPSTATE_USER, else "local")
  --host HOST      Interface to listen on (default 127.0.0.1)
  --port PORT      Port (default 0: a free one)
  --write          Allow restoring versions and trashed handles (writer inspect/<hostname>)
${backendHelp()}

Examples:
  mcpstate inspect
  mcpstate inspect --user alice --write --port 8790
`;

/** The `inspect` subcommand. */
export const inspect: Command = defineCommand({
  name: "inspect",
  summary: "Browse a user's handles, histories and trash in a web page",
  help: HELP,
  options: { ...BACKEND_OPTIONS, ...strings("user", "host", "port"), ...flags("write") },
  async run(values) {
    const port = portOf(values.port);
    const hostname = values.host ?? "127.0.0.1";
    if (hostname === "") throw new UsageError("--host needs a host name or address.");
    const url = backendUrl(values.backend);
    const user = userOf(values.user);
    const write = values.write ?? false;
    const missing = write ? undefined : missingFile(url);
    if (missing !== undefined) {
      throw new CliFailure(
        `No state at ${missing} yet (the server creates it at its first write), so nothing to inspect. Check --backend, or pass --write to create it.`,
      );
    }
    await using store = await openStore(url);
    let serving;
    try {
      serving = serveInspector(store, {
        hostname,
        port,
        user,
        write,
        writer: `inspect/${machineName()}`,
        backendLabel: redact(url),
      });
    } catch (e) {
      throw new CliFailure(
        `Could not listen on ${hostname}:${port}: ${e instanceof Error ? e.message : String(e)}`,
      );
    }
    await println(serving.url);
    note(
      `mcpstate inspect: user ${JSON.stringify(user)}, ${
        write ? "restores allowed (--write)" : "read-only"
      }. Open the URL above; Ctrl-C stops.`,
    );
    const stop = Promise.withResolvers<void>();
    const signals = (["SIGINT", "SIGTERM"] as const).flatMap((sig) => {
      try {
        Deno.addSignalListener(sig, stop.resolve);
        return [sig];
      } catch {
        return []; // not on this platform
      }
    });
    try {
      await Promise.race([serving.finished, stop.promise]);
    } finally {
      for (const sig of signals) Deno.removeSignalListener(sig, stop.resolve);
      await serving.close();
    }
    return EXIT_OK;
  },
});

function portOf(text: string | undefined): number {
  if (text === undefined) return 0;
  const n = Number(text);
  if (!/^\d+$/.test(text) || n > 65535) {
    throw new UsageError(
      `--port must be a port number from 0 to 65535 (got ${JSON.stringify(text)}).`,
    );
  }
  return n;
}
