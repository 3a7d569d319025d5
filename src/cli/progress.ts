/**
 * A progress bar on stderr with count, rate and ETA, drawn only when stderr
 * is a terminal; silent otherwise, so scripts and logs see nothing.
 *
 * @module
 */

const encoder = new TextEncoder();

/** Options of {@link Progress}. */
export interface ProgressOptions {
  /** Draw at all; default: when stderr is a terminal. */
  enabled?: boolean;
  /** How many items there are, when known. */
  total?: number | null;
  /** What the items are, when the total is not known (default `records`). */
  unit?: string;
}

/** A progress bar for a long copy. */
export class Progress {
  readonly #label: string;
  readonly #enabled: boolean;
  readonly #unit: string;
  readonly #start = performance.now();
  #total: number | null;
  #done = 0;
  #last = 0;

  /**
   * Creates a progress bar (nothing is drawn until the first tick).
   *
   * @param label What is being counted ("migrate", "import").
   * @param options Whether to draw, and the total.
   */
  constructor(label: string, options: ProgressOptions = {}) {
    this.#label = label;
    this.#enabled = options.enabled ?? Deno.stderr.isTerminal();
    this.#total = options.total ?? null;
    this.#unit = options.unit ?? "records";
  }

  /** Whether the bar is drawn. */
  get enabled(): boolean {
    return this.#enabled;
  }

  /**
   * Sets how many items there are, once known.
   *
   * @param total The total, or `null` when unknown.
   */
  set total(total: number | null) {
    this.#total = total;
  }

  /**
   * Counts finished items and redraws at most ten times a second.
   *
   * @param n How many more are done.
   */
  tick(n = 1): void {
    this.#done += n;
    if (!this.#enabled) return;
    const now = performance.now();
    if (now - this.#last < 100) return;
    this.#last = now;
    this.#draw(now);
  }

  /** Clears the bar (the caller prints its own summary). */
  finish(): void {
    if (this.#enabled) Deno.stderr.writeSync(encoder.encode("\r\x1b[2K"));
  }

  #draw(now: number): void {
    const secs = (now - this.#start) / 1000;
    const rate = secs > 0 ? this.#done / secs : 0;
    const count = this.#done.toLocaleString("en-US");
    let text: string;
    if (this.#total !== null && this.#total > 0) {
      const frac = Math.min(1, this.#done / this.#total);
      const width = 24;
      const full = Math.round(frac * width);
      const eta = rate > 0 ? Math.max(0, (this.#total - this.#done) / rate) : NaN;
      text = `${this.#label} [${"#".repeat(full)}${".".repeat(width - full)}] ${count}/${
        this.#total.toLocaleString("en-US")
      } ${Math.floor(frac * 100)}%  ${Math.round(rate).toLocaleString("en-US")}/s  ETA ${
        clock(eta)
      }`;
    } else {
      text = `${this.#label} ${count} ${this.#unit}  ${
        Math.round(rate).toLocaleString("en-US")
      }/s  ${clock(secs)}`;
    }
    const columns = consoleColumns();
    Deno.stderr.writeSync(encoder.encode(`\r\x1b[2K${text.slice(0, columns - 1)}`));
  }
}

function consoleColumns(): number {
  try {
    return Deno.consoleSize().columns || 80;
  } catch {
    return 80;
  }
}

/**
 * Formats seconds as `m:ss` or `h:mm:ss`.
 *
 * @param secs Seconds; `NaN` gives `--:--`.
 * @returns The clock text.
 */
export function clock(secs: number): string {
  if (!Number.isFinite(secs)) return "--:--";
  const s = Math.round(secs);
  const h = Math.floor(s / 3600), m = Math.floor(s / 60) % 60, r = s % 60;
  const mm = h > 0 ? String(m).padStart(2, "0") : String(m);
  return `${h > 0 ? `${h}:` : ""}${mm}:${String(r).padStart(2, "0")}`;
}
