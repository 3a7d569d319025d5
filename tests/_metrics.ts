/**
 * Reading a Prometheus scrape in tests and the gauntlet: fetch `/metrics`
 * over real HTTP and look samples up by name and labels.
 *
 * @module
 */

/**
 * Every primitive a backend may have: the only values of the `op` label of
 * `mcpstate_backend_op_duration_seconds` and the only names of backend spans.
 */
export const BACKEND_OPS: ReadonlySet<string> = new Set([
  "insert",
  "read",
  "save",
  "update",
  "remove",
  "untrash",
  "changes",
  "list",
  "sweep",
  "listUsers",
  "importRecord",
  "acquireLease",
  "releaseLease",
  "leases",
  "readLeased",
  "subscribe",
  "usage",
  "trashedUntil",
  "transfer",
  "putGrant",
  "readGrant",
  "endGrant",
  "grantsOf",
  "grantsTo",
  "listTrash",
  "sweepGrants",
  "countUser",
  "eraseUser",
  "readKey",
  "createKey",
  "rewrapKey",
  "deleteKey",
  "listKeys",
  "scanContent",
  "replaceContent",
]);

/** One sample line of the text format: `name{label="value",…} number`. */
export interface Sample {
  /** The metric name, with its `_bucket`/`_count`/`_sum` suffix where it has one. */
  name: string;
  /** Its labels. */
  labels: Record<string, string>;
  /** Its value. */
  value: number;
}

/** A parsed scrape. */
export interface Scrape {
  /** Every sample, in order. */
  samples: Sample[];
  /** The raw text. */
  text: string;
  /** The samples of `name` whose labels include `labels`. */
  all(name: string, labels?: Record<string, string>): Sample[];
  /** The sum of the values of {@link Scrape.all}; 0 when there are none. */
  sum(name: string, labels?: Record<string, string>): number;
  /** The value of the one sample of `name` with exactly `labels`, or `undefined`. */
  value(name: string, labels?: Record<string, string>): number | undefined;
}

const LINE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

/**
 * Parses the Prometheus text format (the parts `prom-client` writes).
 *
 * @param text The exposition text.
 * @returns The samples and look-ups.
 */
export function parseMetrics(text: string): Scrape {
  const samples: Sample[] = [];
  for (const line of text.split("\n")) {
    if (line === "" || line.startsWith("#")) continue;
    const m = LINE.exec(line);
    if (!m) throw new Error(`Not a sample line: ${line}`);
    const labels: Record<string, string> = {};
    for (const [, k, v] of (m[2] ?? "").matchAll(LABEL)) {
      labels[k!] = v!.replace(/\\(.)/g, (_, c) => c === "n" ? "\n" : c);
    }
    samples.push({ name: m[1]!, labels, value: Number(m[3]) });
  }
  const matches = (s: Sample, labels: Record<string, string>) =>
    Object.entries(labels).every(([k, v]) => s.labels[k] === v);
  const all = (name: string, labels: Record<string, string> = {}) =>
    samples.filter((s) => s.name === name && matches(s, labels));
  return {
    samples,
    text,
    all,
    sum: (name, labels) => all(name, labels).reduce((n, s) => n + s.value, 0),
    value: (name, labels = {}) =>
      all(name, labels).find((s) => Object.keys(s.labels).length === Object.keys(labels).length)
        ?.value,
  };
}

/**
 * Fetches and parses `http://<host>:<port>/metrics`.
 *
 * @param port The metrics port.
 * @param host The metrics host. Default `127.0.0.1`.
 * @returns The scrape.
 * @throws {Error} When the answer is not 200 Prometheus text.
 */
export async function scrape(port: number, host = "127.0.0.1"): Promise<Scrape> {
  const res = await fetch(`http://${host}:${port}/metrics`);
  const text = await res.text();
  if (res.status !== 200 || !res.headers.get("content-type")?.startsWith("text/plain")) {
    throw new Error(`GET /metrics answered ${res.status} ${res.headers.get("content-type")}`);
  }
  return parseMetrics(text);
}

/**
 * Scrapes until the metrics listener answers (a stdio server starts it
 * before serving, but a 2026-07-28 client connects without a round trip).
 *
 * @param port The metrics port.
 * @param timeoutMs How long to wait. Default 30 s.
 * @returns The first scrape.
 * @throws {Error} When nothing answers in time.
 */
export async function waitForMetrics(port: number, timeoutMs = 30_000): Promise<Scrape> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await scrape(port);
    } catch (e) {
      if (Date.now() > deadline) throw e;
      await new Promise((r) => setTimeout(r, 50));
    }
  }
}
