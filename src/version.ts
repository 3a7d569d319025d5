/**
 * The version of mcpstate, read from `deno.json` (bundled into the binary).
 * The library owns it; the server reports it and the CLI prints it.
 *
 * @module
 */

import denoJson from "../deno.json" with { type: "json" };

/** The package version, e.g. `0.4.0`. */
export const VERSION: string = denoJson.version;
