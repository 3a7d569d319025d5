/**
 * The helpers test files used to import from here, kept at this path so
 * that those files still run: new code imports them from `./_helpers.ts`,
 * and the contract suite from `./contract/mod.ts`.
 *
 * @module
 */

export { FakeClock, freshUser, pageThrough, rejectsWith, within } from "./_helpers.ts";
