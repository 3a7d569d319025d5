/**
 * Leases and watch: advisory leases on a handle, and the stream of its
 * snapshots as its version moves.
 *
 * @module
 */

import { BackendError, InvalidArgument } from "../errors.ts";
import type {
  LeaseOptions,
  LeaseResult,
  ReleaseOptions,
  Snapshot,
  WatchOptions,
} from "../types.ts";
import {
  checkHolder,
  checkLeaseSeconds,
  checkUserHandle,
  MAX_TIMER_MS,
  noLeases,
} from "./_check.ts";
import { alive, call, type Core, missing } from "./_core.ts";
import { get } from "./_read.ts";

/** Takes or renews an advisory lease (see {@link HandleStore.lease}). */
export const lease: LeaseCall<LeaseOptions, LeaseResult> = async (core, handle, options) => {
  const { user, holder } = leaseArgs(options, handle);
  const seconds = checkLeaseSeconds(options.seconds);
  const leases = leasesOf(core);
  const now = core.clock();
  const r = await call(core, () => core.backend.read(user, handle));
  if (!r) throw await missing(core, user, handle);
  alive(r, handle, now);
  const expiresAt = now + Math.max(1, Math.round(seconds * 1000));
  const res = await call(core, () => leases.acquire(user, handle, { holder, expiresAt }, now));
  return {
    acquired: res.acquired,
    holder: res.lease.holder,
    expiresAt: new Date(res.lease.expiresAt),
  };
};

/** Releases the lease a writer holds (see {@link HandleStore.release}). */
export const release: LeaseCall<ReleaseOptions, boolean> = async (core, handle, options) => {
  const { user, holder } = leaseArgs(options, handle);
  const leases = leasesOf(core);
  return await call(core, () => leases.release(user, handle, holder, core.clock()));
};

/** The shape of {@link lease} and {@link release}. */
type LeaseCall<O, T> = (core: Core, handle: string, options: O) => Promise<T>;

/** The user and the holder of a lease call, checked in that order. */
function leaseArgs(options: ReleaseOptions, handle: string): { user: string; holder: string } {
  return { user: checkUserHandle(options, handle), holder: checkHolder(options.writer) };
}

/** The backend's lease primitives; an error when it has none. */
function leasesOf(core: Core): NonNullable<Core["backend"]["leases"]> {
  const leases = core.backend.leases;
  if (!leases) throw noLeases();
  return leases;
}

/** Watches a handle (see {@link HandleStore.watch}). */
export function watch<S>(
  core: Core,
  handle: string,
  options: WatchOptions,
): AsyncIterableIterator<Snapshot<S>> {
  const user = checkUserHandle(options, handle);
  const signal = options.signal;
  if (signal !== undefined && !(signal instanceof AbortSignal)) {
    throw new InvalidArgument("signal must be an AbortSignal.", { field: "signal" });
  }
  const pollMs = options.pollMs ?? 5_000;
  if (typeof pollMs !== "number" || !(pollMs >= 10 && pollMs <= MAX_TIMER_MS)) {
    throw new InvalidArgument(`pollMs must be a number of ms from 10 to ${MAX_TIMER_MS}.`, {
      field: "pollMs",
    });
  }
  return watching<S>(core, user, handle, signal, pollMs);
}

/** The generator of {@link watch}, once its arguments are checked. */
async function* watching<S>(
  core: Core,
  user: string,
  handle: string,
  signal: AbortSignal | undefined,
  pollMs: number,
): AsyncGenerator<Snapshot<S>> {
  if (core.closed) throw new BackendError("The store is closed; open a new one.");
  let dirty = true;
  let wake = Promise.withResolvers<void>();
  const poke = () => {
    dirty = true;
    wake.resolve();
  };
  const onAbort = () => wake.resolve();
  signal?.addEventListener("abort", onAbort);
  const feed = core.backend.feed;
  const unsubscribe = feed ? await call(core, () => feed.subscribe(user, handle, poke)) : undefined;
  const timer = setInterval(poke, pollMs);
  Deno.unrefTimer(timer);
  try {
    let last = -1;
    while (!signal?.aborted) {
      if (dirty) {
        dirty = false;
        const snap = await get<S>(core, handle, { user });
        if (signal?.aborted) return;
        if (snap.version !== last) {
          last = snap.version;
          yield snap;
        }
        continue;
      }
      wake = Promise.withResolvers<void>();
      if (dirty || signal?.aborted) continue;
      await wake.promise;
    }
  } finally {
    clearInterval(timer);
    signal?.removeEventListener("abort", onAbort);
    unsubscribe?.();
  }
}
