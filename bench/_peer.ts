/**
 * The real Python mcpstate 0.2 store, for the benches: its source is found
 * through the environment variable `PEER_SRC` (the folder that holds its
 * `mcpstate` package) and run with `python3` and `bench/_peer_driver.py`,
 * which drives it through its public API (see that file for the requests).
 *
 * @module
 */

/** A running Python store, one request at a time. */
export class Peer {
  readonly #child: Deno.ChildProcess;
  readonly #writer: WritableStreamDefaultWriter<Uint8Array>;
  readonly #lines: AsyncIterator<string>;

  private constructor(src: string) {
    const driver = new URL("./_peer_driver.py", import.meta.url).pathname;
    this.#child = new Deno.Command("python3", {
      args: ["-u", driver],
      env: { PYTHONPATH: src },
      stdin: "piped",
      stdout: "piped",
      stderr: "inherit",
    }).spawn();
    this.#writer = this.#child.stdin.getWriter();
    this.#lines = this.#child.stdout.pipeThrough(new TextDecoderStream())
      .pipeThrough(lineSplitter())[Symbol.asyncIterator]();
  }

  /** The source folder of the Python store (`PEER_SRC`), if set. */
  static get src(): string | undefined {
    return Deno.env.get("PEER_SRC") || undefined;
  }

  /** Starts the Python store's driver; `undefined` when `PEER_SRC` is not set. */
  static start(): Peer | undefined {
    const src = Peer.src;
    return src === undefined ? undefined : new Peer(src);
  }

  /** Sends one request; its answer (milliseconds for timed requests, else `null`). */
  async ask(request: Record<string, unknown>): Promise<number | null> {
    await this.#writer.write(new TextEncoder().encode(JSON.stringify(request) + "\n"));
    const { value, done } = await this.#lines.next();
    if (done) throw new Error("The Python store's driver exited.");
    return (JSON.parse(value) as { ok: number | null }).ok;
  }

  /** Ends the driver (it closes its store) and waits for it. */
  async close(): Promise<void> {
    await this.#writer.close();
    const { success } = await this.#child.status;
    await this.#lines.return?.();
    if (!success) throw new Error("The Python store's driver failed.");
  }
}

/** Splits a text stream into lines. */
function lineSplitter(): TransformStream<string, string> {
  let rest = "";
  return new TransformStream({
    transform(chunk, out) {
      const parts = (rest + chunk).split("\n");
      rest = parts.pop()!;
      for (const p of parts) out.enqueue(p);
    },
    flush(out) {
      if (rest) out.enqueue(rest);
    },
  });
}
