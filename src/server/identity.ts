/**
 * Writer labels: who wrote a state last, as `<hostname>/<client name>`.
 *
 * @module
 */

import type { ToolRequest } from "./tools.ts";

/**
 * This machine's hostname, or `"localhost"` when it can't be read (no `sys`
 * permission, or a platform without one).
 *
 * @returns The hostname.
 */
export function machineName(): string {
  try {
    return Deno.hostname() || "localhost";
  } catch {
    return "localhost";
  }
}

/**
 * The default writer resolver: a fixed label when one is configured
 * (`MCPSTATE_WRITER`), else `<hostname>/<client name>` when the request names
 * its client, else `<hostname>`.
 *
 * @param fixed A fixed label, or `undefined`.
 * @param hostname The hostname to use; default {@link machineName}.
 * @returns A resolver for {@link StateToolsOptions.writer}.
 *
 * @example
 * ```ts
 * import { writerLabel } from "@mcpstate/core/server";
 * const writer = writerLabel(undefined, "laptop");
 * ```
 */
export function writerLabel(
  fixed: string | undefined,
  hostname: string = machineName(),
): (request: Pick<ToolRequest, "clientName">) => string {
  if (fixed !== undefined) return () => fixed;
  return ({ clientName }) =>
    (clientName === undefined ? hostname : `${hostname}/${clientName}`).slice(0, 256);
}
