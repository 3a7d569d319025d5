/**
 * The CLI dispatcher (being built; `serve` is wired to the server).
 *
 * @module
 */

/**
 * Runs the CLI.
 *
 * @param args Command-line arguments without the program name.
 * @returns The exit code.
 */
export async function main(args: string[]): Promise<number> {
  const [command, ...rest] = args;
  if (command === "serve") {
    const { serveFromArgs } = await import("../server/mod.ts");
    return await serveFromArgs(rest);
  }
  console.error(`mcpstate: unknown command ${JSON.stringify(command ?? "")}; try --help`);
  return 2;
}
