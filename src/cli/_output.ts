/**
 * What a subcommand prints: lines, JSON, tables and notes on stderr.
 *
 * @module
 */

const encoder = new TextEncoder();

/**
 * Writes all of `bytes` to a writer (`Deno.stdout`, a file).
 *
 * @param w The writer.
 * @param bytes The bytes.
 */
export async function writeAll(
  w: { write(p: Uint8Array): Promise<number> },
  bytes: Uint8Array,
): Promise<void> {
  let off = 0;
  while (off < bytes.length) off += await w.write(bytes.subarray(off));
}

/**
 * Prints text to stdout.
 *
 * @param text The text; a newline is added.
 */
export async function println(text: string): Promise<void> {
  await writeAll(Deno.stdout, encoder.encode(text + "\n"));
}

/**
 * Prints a value as indented JSON to stdout.
 *
 * @param value A JSON value.
 */
export async function printJson(value: unknown): Promise<void> {
  await println(JSON.stringify(value, null, 2));
}

/**
 * Prints a command's result: as JSON with `--json`, else as a line for people.
 *
 * @param json Whether `--json` was given.
 * @param value The JSON form.
 * @param text The line for people.
 */
export async function printResult(
  json: boolean | undefined,
  value: unknown,
  text: string,
): Promise<void> {
  if (json) await printJson(value);
  else await println(text);
}

/**
 * Prints one line to stderr (messages for people: notes and summaries).
 *
 * @param text The text.
 */
export function note(text: string): void {
  Deno.stderr.writeSync(encoder.encode(text + "\n"));
}

/**
 * Collapses an error message into one line with credentials redacted.
 *
 * @param text Any message.
 * @returns One line.
 */
export function oneLine(text: string): string {
  // Like redact(), but leaves placeholders such as "redis://[user:pass@]host" alone.
  return text.replace(/([a-z][a-z0-9+.-]*:\/\/)(?!\[)[^\s/@]*@/gi, "$1***@")
    .replace(/\s*\r?\n\s*/g, " ").trim();
}

/**
 * Renders rows as a left-aligned table with a header.
 *
 * @param header Column titles.
 * @param rows Cells.
 * @returns The lines, without a trailing newline.
 */
export function table(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (cells: string[]) =>
    cells.map((c, i) => i === cells.length - 1 ? c : c.padEnd(widths[i] ?? 0)).join("  ")
      .trimEnd();
  return [line(header), ...rows.map(line)].join("\n");
}

/**
 * Formats epoch ms as `2026-07-28 12:00:05Z` for tables.
 *
 * @param ms Epoch ms.
 * @returns The short UTC form.
 */
export function shortTime(ms: number): string {
  return new Date(ms).toISOString().replace("T", " ").replace(/\.\d{3}Z$/, "Z");
}
