/**
 * The crash gauntlet's checks of handles that travel (fork, share, unshare,
 * transfer, and patches through an alias), after each kill:
 *
 * - a fork holds its origin's state at the fork, with `forkedFrom` naming
 *   the origin and its version; a fork in flight is there whole or not at all;
 * - the grants in force on a handle are exactly the acknowledged ones (plus a
 *   transfer's `keep`, and a share in flight when its version landed), each
 *   alias reads the owner's record for its grantee (same version, same
 *   state), and the alias of every ended grant (unshared, or ended by a
 *   transfer) answers `handle_not_found`;
 * - every user's listing shows exactly the aliases in force for that user.
 *
 * Where the handle lives (the old owner or the new one, never both) is
 * checked with its record in `_crash_verify.ts`.
 *
 * @module
 */

import type { HandleStore, Snapshot } from "../mod.ts";
import {
  type Candidate,
  forked,
  getOrNull,
  type GrantModel,
  type Model,
  type Rebuilt,
  sameJson,
  summary,
} from "./_crash_model.ts";

/** What the travel checks count. */
export interface TravelCounts {
  /**
   * Grants checked, each by a read through its alias by its grantee: those
   * in force (compared with the acknowledged ones) and those ended.
   */
  aliasesRead: number;
  /** Forks whose lineage and state were checked. */
  forksChecked: number;
}

/** One iteration's travel checks: violations and counts, and the aliases found in force. */
export class TravelCheck {
  /** Grantee → alias → the version it read. */
  readonly inForce: Map<string, Map<string, number>> = new Map();

  /**
   * @param store The reopened store.
   * @param counts Where the counts go.
   * @param fail Reports a violation.
   */
  constructor(
    readonly store: HandleStore,
    readonly counts: TravelCounts,
    readonly fail: (msg: string) => void,
  ) {}

  /**
   * Checks a live record that matched candidate `c`: its lineage, its grants
   * and their aliases.
   */
  async record(c: Candidate, s: Snapshot): Promise<void> {
    const m = c.m;
    const fail = (msg: string) => this.fail(`${m.handle}: ${msg}`);
    if (m.forkedFrom) {
      this.counts.forksChecked++;
      if (!sameJson(s.forkedFrom, m.forkedFrom)) {
        fail(
          `forkedFrom ${JSON.stringify(s.forkedFrom)}, forked from ${JSON.stringify(m.forkedFrom)}`,
        );
      }
    } else if (s.forkedFrom !== undefined) {
      fail(`forkedFrom ${JSON.stringify(s.forkedFrom)} on a handle that is no fork`);
    }
    const listed = await this.store.grants(m.handle, { user: m.owner });
    const unknown = [...m.unknownGrants];
    for (const g of listed) {
      const known = m.grants.find((x) => x.grant === g.grant);
      if (known) {
        if (known.alias !== g.handle || known.to !== g.to || known.rights !== g.rights) {
          fail(`grant ${g.grant} is ${describe(g)}, acknowledged as ${describe(known)}`);
        }
      } else {
        const i = unknown.findIndex((u) => u.to === g.to && u.rights === g.rights);
        if (i < 0) fail(`grant ${g.grant} (${describe(g)}) was never acknowledged (${c.what})`);
        else unknown.splice(i, 1);
      }
      await this.#aliasInForce({ ...g, grant: g.grant, alias: g.handle }, m.owner, s);
    }
    for (const g of m.grants) {
      if (!listed.some((x) => x.grant === g.grant)) {
        fail(`acknowledged grant ${g.grant} (${describe(g)}) is not in force (${c.what})`);
      }
    }
    for (const u of unknown) {
      fail(`no grant ${describe(u)} is in force, yet ${c.what} made one`);
    }
  }

  /** Checks that every ended grant's alias answers `handle_not_found` for its grantee. */
  async ended(m: Model): Promise<void> {
    for (const g of m.ended) {
      this.counts.aliasesRead++;
      const a = await getOrNull(this.store, g.alias, g.to);
      if (a) {
        this.fail(
          `${m.handle}: alias ${g.alias} of the ended grant ${g.grant} still reads for ${g.to} (v${a.version})`,
        );
      }
    }
  }

  /** The alias of a grant in force reads the owner's record for its grantee. */
  async #aliasInForce(g: GrantModel, owner: string, s: Snapshot): Promise<void> {
    this.counts.aliasesRead++;
    const a = await getOrNull(this.store, g.alias, g.to);
    if (!a) {
      this.fail(`${s.handle}: alias ${g.alias} of grant ${g.grant} reads nothing for ${g.to}`);
      return;
    }
    let mine = this.inForce.get(g.to);
    if (!mine) this.inForce.set(g.to, mine = new Map());
    mine.set(g.alias, a.version);
    if (
      a.version !== s.version || !sameJson(a.state, s.state) || a.sharedBy !== owner ||
      a.rights !== g.rights
    ) {
      this.fail(
        `${s.handle}: alias ${g.alias} reads v${a.version} ${
          summary(a.state)
        } shared by ${a.sharedBy} (${a.rights}); the record is v${s.version} ${
          summary(s.state)
        } of ${owner} (${g.rights})`,
      );
    }
  }

  /** Checks that each user's listing shows exactly the aliases in force for that user. */
  async listings(users: readonly string[]): Promise<void> {
    for (const user of users) {
      const want = this.inForce.get(user) ?? new Map<string, number>();
      const aliases = (await this.store.list(user, { includeExpired: true })).filter((i) =>
        i.sharedBy !== undefined
      );
      for (const i of aliases) {
        const v = want.get(i.handle);
        if (v === undefined) {
          this.fail(
            `${user} lists ${i.handle} shared by ${i.sharedBy}, an alias of no grant in force`,
          );
        } else if (v !== i.version) {
          this.fail(`${user} lists ${i.handle} at v${i.version}; it reads v${v}`);
        }
      }
      for (const alias of want.keys()) {
        if (!aliases.some((i) => i.handle === alias)) {
          this.fail(`${user}'s listing lacks the alias ${alias} of a grant in force`);
        }
      }
    }
  }
}

/**
 * The candidate of a record nobody acknowledged that a fork in flight may
 * explain (its `forkedFrom` names the origin that fork was made of).
 *
 * @returns The fork as it must be, or `null` when no fork in flight explains it.
 */
export function forkInFlight(s: Snapshot, r: Rebuilt): Candidate | null {
  const begin = r.pendingForks.find((b) => b.h === s.forkedFrom?.handle);
  const origin = begin && r.models.get(begin.h!);
  if (!begin || !origin) return null;
  r.pendingForks.splice(r.pendingForks.indexOf(begin), 1);
  return { what: `in-flight fork #${begin.id} applied`, m: forked(s.handle, origin) };
}

function describe(g: { to: string; rights: string; alias?: string; handle?: string }): string {
  const alias = g.alias ?? g.handle;
  return `to ${g.to}, ${g.rights}${alias ? `, alias ${alias}` : ""}`;
}
