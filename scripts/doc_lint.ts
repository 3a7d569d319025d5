/**
 * Runs `deno doc --lint` on every entry of the export map in `deno.json`,
 * each on its own: an entry's public types must be documented and exported
 * by that entry, whatever the other entries export. Exits 1 when one fails.
 *
 * ```sh
 * deno task doc
 * ```
 *
 * @module
 */

import denoJson from "../deno.json" with { type: "json" };

const root = new URL("../", import.meta.url);
let failed = 0;
for (const [name, path] of Object.entries(denoJson.exports)) {
  const { code } = await new Deno.Command(Deno.execPath(), {
    args: ["doc", "--lint", path],
    cwd: root,
    stdout: "inherit",
    stderr: "inherit",
  }).output();
  if (code !== 0) {
    console.error(`deno doc --lint ${path} (export "${name}") failed`);
    failed++;
  }
}
if (failed > 0) Deno.exit(1);
