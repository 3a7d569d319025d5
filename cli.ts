/**
 * The `mcpstate` command: `serve`, `list`, `get`, `delete`, `export`,
 * `import`, `migrate`, `sweep`, `doctor`, `config`. `deno compile` turns this
 * file into the single `mcpstate` binary.
 *
 * @module
 */

import { main } from "./src/cli/main.ts";

if (import.meta.main) Deno.exit(await main(Deno.args));
