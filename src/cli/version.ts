/**
 * The version of mcpstate, read from `deno.json` (bundled into the binary).
 *
 * @module
 */

import denoJson from "../../deno.json" with { type: "json" };

/** The package version, e.g. `0.4.0`. */
export const VERSION: string = denoJson.version;
