/**
 * The backend contract: one conformance suite that every backend runs
 * unchanged, in groups that are switched on by what the backend declares —
 * the way keyv's `storageTestSuite(test, factory, options)` is toggled by
 * options. A backend proves itself by passing it.
 *
 * ```ts ignore
 * Deno.test("contract: sqlite file", (t) =>
 *   backendContract(t, { open: () => openBackend(url), url }));
 * ```
 *
 * ## Targets
 *
 * A {@link ContractTarget} opens the backend under test. Each call of its
 * `open` may be a new connection to the same data, as another process would
 * have; a target whose data lives in one object (the memory backend, SQLite's
 * `:memory:`) hands out {@link sharedView}s of it. A target with a `url` that
 * another process can open to reach the same data (a file, a server) switches
 * the cross-process steps on: they run `tests/_child.ts` on that URL.
 *
 * ## How a backend declares a capability
 *
 * By having the optional primitives of the `Backend` interface behind it; the
 * suite reads them off the backend object ({@link CAPABILITIES}):
 *
 * | capability     | the backend has                             | switches on                |
 * | -------------- | ------------------------------------------- | -------------------------- |
 * | `users`        | `listUsers`                                 | import (with importRecord) |
 * | `importRecord` | `importRecord`                              | import (with users)        |
 * | `feed`         | `subscribe`                                 | feed                       |
 * | `leases`       | `acquireLease`, `releaseLease` and `leases` | leases                     |
 * | `quotas`       | `usage`                                     | quotas                     |
 * | `found`        | `trashedUntil`                              | found                      |
 * | `erasure`      | `erasure.count` and `erasure.erase`         | erase (with grants, leases |
 * |                |                                             | and quotas)                |
 * | `crossProcess` | (the target has a `url`)                    | cross-process, and the     |
 * |                |                                             | cross-process steps of     |
 * |                |                                             | feed and leases            |
 *
 * A capability is all of its primitives or none: a backend with some of them
 * fails the suite. The third argument of {@link backendContract} may state
 * capabilities outright: `true` for one the backend lacks fails loudly (a
 * backend that should have it has lost it), `false` switches its groups off.
 * Everything else is read from the backend, so a new backend passes by
 * declaring, not by new rules.
 *
 * ## How to add a group
 *
 * 1. Write `tests/contract/<name>.ts` whose default export is
 *    `group(name, requires, steps)` (from `_group.ts`): its name, the
 *    capabilities without which it does not run, and its steps, each
 *    `step(name, run)` (or `step(name, run, requires)` for a step that needs
 *    more than its group). A step's `run` gets a {@link ContractContext}: a
 *    store on the target with a fake clock, a way to open more stores on the
 *    same data, the backend below, and the target. The data is shared by
 *    every step: give each its own user (`freshUser()`).
 * 2. Add one line to {@link GROUPS} below.
 *
 * A group that needs a primitive no capability names yet also adds one line
 * to {@link CAPABILITIES}: the capability's name and the primitives that make
 * it. The backends that have them then run the group; no other file changes.
 *
 * @module
 */

import assert from "node:assert/strict";
import { type Backend, HandleStore } from "../../mod.ts";
import { FakeClock } from "../_helpers.ts";
import {
  CAPABILITIES,
  type Capabilities,
  type Capability,
  type ContractContext,
  type ContractGroup,
  type ContractTarget,
  type Member,
  memberOf,
} from "./_group.ts";

export { CAPABILITIES } from "./_group.ts";
export type {
  Capabilities,
  Capability,
  ContractContext,
  ContractGroup,
  ContractStep,
  ContractTarget,
  EngineChecks,
  WorkloadRun,
} from "./_group.ts";

/** Every group of the suite, in the order they run. Add a group here: one line. */
export const GROUPS: readonly ContractGroup[] = [
  (await import("./core.ts")).default,
  (await import("./idempotency.ts")).default,
  (await import("./history.ts")).default,
  (await import("./trash.ts")).default,
  (await import("./listing.ts")).default,
  (await import("./identifiers.ts")).default,
  (await import("./import.ts")).default,
  (await import("./feed.ts")).default,
  (await import("./leases.ts")).default,
  (await import("./quotas.ts")).default,
  (await import("./kinds.ts")).default,
  (await import("./fork.ts")).default,
  (await import("./share.ts")).default,
  (await import("./found.ts")).default,
  (await import("./erase.ts")).default,
  (await import("./encryption.ts")).default,
  (await import("./cross_process.ts")).default,
  (await import("./encrypt.ts")).default,
];

/**
 * Runs the contract suite against one target, as steps of the test `t`:
 * first the capabilities (which must be whole, and agree with any stated
 * outright), then every group they switch on.
 *
 * @param t The test the steps belong to.
 * @param target What to run against.
 * @param declared Capabilities stated outright (the rest is read from the backend).
 */
export async function backendContract(
  t: Deno.TestContext,
  target: ContractTarget,
  declared: Partial<Capabilities> = {},
): Promise<void> {
  const clock = new FakeClock();
  const backend = await target.open();
  const store = new HandleStore(backend, { clock: clock.fn });
  try {
    const found = capabilitiesOf(backend, target);
    const capabilities = { ...found };
    for (const [name, value] of Object.entries(declared) as [Capability, boolean][]) {
      assert.ok(!value || found[name], `declared ${name}, but the target lacks ${lacking(name)}`);
      capabilities[name] = value;
    }
    const names = Object.keys(capabilities) as Capability[];
    const on = names.filter((n) => capabilities[n]),
      off = names.filter((n) => found[n] && !on.includes(n));
    const title = `capabilities: ${on.join(", ") || "none"}` +
      (off.length ? ` (switched off: ${off.join(", ")})` : "");
    const ok = await t.step(title, () => {
      assert.deepEqual(
        store.capabilities,
        { users: found.users, importRecord: found.importRecord, grants: found.grants },
        "the store reads other capabilities off the backend than the suite",
      );
    });
    if (!ok) return;
    const c: ContractContext = {
      store,
      backend,
      clock,
      target,
      capabilities,
      openStore: async (options) => new HandleStore(await target.open(), options),
    };
    const has = (needs: readonly Capability[] = []) => needs.every((n) => capabilities[n]);
    for (const group of GROUPS) {
      if (!has(group.requires)) continue;
      await t.step(group.name, async (t) => {
        for (const step of group.steps) {
          if (has(step.requires)) await t.step(step.name, () => step.run(c));
        }
      });
    }
  } finally {
    await store.close();
  }
}

/**
 * The capabilities of a target, read from its backend's primitives and its
 * `url`.
 *
 * @throws {AssertionError} for a capability with only some of its primitives.
 */
function capabilitiesOf(backend: Backend, target: ContractTarget): Capabilities {
  const found = {} as Capabilities;
  for (const [name, primitives] of Object.entries(CAPABILITIES)) {
    const present = primitives.filter((p) => typeof memberOf(backend, p) === "function");
    assert.ok(
      present.length === 0 || present.length === primitives.length,
      `${name} needs ${primitives.join(", ")}; the backend has only ${present.join(", ")}`,
    );
    found[name as Capability] = present.length > 0;
  }
  found.crossProcess = target.url !== undefined;
  return found;
}

/** What a target lacks when it lacks a capability. */
function lacking(name: Capability): string {
  return name === "crossProcess" ? "a url" : CAPABILITIES[name].map((p) => `${p}()`).join(", ");
}

/**
 * A view of one backend that every store of the suite can open and close:
 * its `close` does nothing, so the data outlives each store, as a database
 * outlives its connections. `without` leaves capability groups (`records`)
 * or members of one (`leases.readLeased`) out, for a target that runs the
 * suite on fewer capabilities.
 *
 * @param backend The backend holding the data.
 * @param without Groups and members the view does not have.
 * @returns The view.
 */
export function sharedView(
  backend: Backend,
  without: readonly (keyof Backend | Member)[] = [],
): Backend {
  return new Proxy(backend, {
    get(target, name) {
      if (name === "close") return () => Promise.resolve();
      if (without.includes(name as keyof Backend)) return undefined;
      const v = Reflect.get(target, name, target);
      const hidden = without.filter((w) => w.startsWith(`${String(name)}.`));
      if (hidden.length > 0) {
        return Object.fromEntries(
          Object.entries(v as object).filter(([m]) =>
            !hidden.includes(`${String(name)}.${m}` as Member)
          ),
        );
      }
      return typeof v === "function" ? v.bind(target) : v;
    },
    has(target, name) {
      return !without.includes(name as keyof Backend) && Reflect.has(target, name);
    },
  });
}
