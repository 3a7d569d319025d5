/**
 * The shapes of the contract suite — targets, capabilities, groups, steps and
 * what a step is given — and {@link group} and {@link step}, which every
 * group file uses. (They live apart from `mod.ts`, which loads the group
 * files, so that a group file never imports the module that imports it.)
 *
 * @module
 */

import type { Backend, HandleStore, HandleStoreOptions } from "../../mod.ts";
import type { FakeClock } from "../_helpers.ts";

/** What the suite runs against: how to open the backend, and how another process reaches it. */
export interface ContractTarget {
  /** Opens the backend under test; each call may be a new connection to the same data. */
  open(): Promise<Backend>;
  /**
   * A URL that opens the same data from another OS process; it switches the
   * cross-process steps on. Leave it out where the data lives in this process
   * alone (memory, `:memory:`).
   */
  url?: string;
  /** Engine checks the cross-process steps run on what their workloads leave behind. */
  inspect?: EngineChecks;
}

/** Engine-specific checks around the cross-process workloads (see `cross_process.ts`). */
export interface EngineChecks {
  /** Runs before the writer processes start. */
  beforeWriters?(): Promise<void>;
  /** Runs once every writer process landed its patches. */
  afterWriters?(run: WorkloadRun): Promise<void>;
  /** Runs once the writer killed mid-write was checked. */
  afterKill?(run: WorkloadRun): Promise<void>;
}

/** What a cross-process workload did: on whose handle, and how many patches landed. */
export interface WorkloadRun {
  /** The user of the handle. */
  user: string;
  /** The handle every process patched. */
  handle: string;
  /** The handle's version at the end. */
  version: number;
  /** How many patches landed. */
  patches: number;
}

/** A capability group of {@link Backend} (`grants`, `leases`, …). */
export type Group = {
  [K in keyof Backend]-?: NonNullable<Backend[K]> extends object
    ? NonNullable<Backend[K]> extends (...args: never[]) => unknown ? never : K
    : never;
}[keyof Backend];

/** A member of a capability group, as `group.member` (`grants.put`). */
export type Member = {
  [G in Group]: `${G}.${keyof NonNullable<Backend[G]> & string}`;
}[Group];

/**
 * How a backend object declares each capability: the group members that
 * make it (all of them, or none). A new capability is one line here.
 */
export const CAPABILITIES = {
  users: ["records.users"],
  importRecord: ["records.import"],
  feed: ["feed.subscribe"],
  leases: ["leases.acquire", "leases.release", "leases.of"],
  quotas: ["quotas.usage"],
  transfer: ["transfer.move"],
  grants: ["grants.put", "grants.read", "grants.end", "grants.of", "grants.to", "grants.sweep"],
  found: ["trash.until"],
  erasure: ["erasure.count", "erasure.erase"],
  keys: ["keys.get", "keys.create", "keys.rewrap", "keys.delete", "keys.list"],
  content: ["content.scan", "content.replace"],
} as const satisfies Record<string, readonly Member[]>;

/**
 * The group member `member` (`group.member`) of a backend, or `undefined`.
 *
 * @param backend The backend.
 * @param member The member.
 * @returns The member.
 */
export function memberOf(backend: Backend, member: Member): unknown {
  const [g, m] = member.split(".") as [Group, string];
  return (backend[g] as Record<string, unknown> | undefined)?.[m];
}

/**
 * The capabilities a group or a step may require: those of
 * {@link CAPABILITIES}, and `crossProcess`, which the target's `url` gives.
 */
export type Capability = keyof typeof CAPABILITIES | "crossProcess";

/** Which capabilities a run has: each on or off. */
export type Capabilities = Record<Capability, boolean>;

/** What every step of the suite is given. */
export interface ContractContext {
  /** A store on the first backend the target opened, on {@link ContractContext.clock}. */
  readonly store: HandleStore;
  /** The backend below {@link ContractContext.store}, for steps that work below the store. */
  readonly backend: Backend;
  /** The fake clock of {@link ContractContext.store}; steps move it by hand. */
  readonly clock: FakeClock;
  /** A store on a newly opened backend of the target (the same data), with `options`. */
  openStore(options?: HandleStoreOptions): Promise<HandleStore>;
  /** The target. */
  readonly target: ContractTarget;
  /** The capabilities this run has. */
  readonly capabilities: Capabilities;
}

/** One step of a group. */
export interface ContractStep {
  /** Its name in the test output: what it shows. */
  name: string;
  /** Capabilities it needs beyond its group's. */
  requires?: readonly Capability[];
  /** Runs it. */
  run(c: ContractContext): Promise<void>;
}

/** A group of steps, switched on by the capabilities it requires. */
export interface ContractGroup {
  /** Its name in the test output. */
  name: string;
  /** The capabilities without which none of its steps runs. */
  requires: readonly Capability[];
  /** Its steps, run in order. */
  steps: readonly ContractStep[];
}

/**
 * A group of steps.
 *
 * @param name Its name in the test output.
 * @param requires The capabilities without which none of its steps runs.
 * @param steps Its steps, run in order.
 * @returns The group.
 */
export function group(
  name: string,
  requires: readonly Capability[],
  steps: readonly ContractStep[],
): ContractGroup {
  return { name, requires, steps };
}

/**
 * One step of a group.
 *
 * @param name Its name in the test output: what it shows.
 * @param run Runs it.
 * @param requires Capabilities it needs beyond its group's.
 * @returns The step.
 */
export function step(
  name: string,
  run: (c: ContractContext) => Promise<unknown>,
  requires: readonly Capability[] = [],
): ContractStep {
  return { name, requires, run: async (c) => void await run(c) };
}
