/**
 * The in-process backend (`memory://`): the reference implementation of the
 * backend interface, for tests and demos. Nothing survives the process.
 *
 * @example
 * ```ts
 * import { HandleStore } from "@mcpstate/core";
 * import { MemoryBackend } from "@mcpstate/core/memory";
 * await using store = new HandleStore(new MemoryBackend());
 * const handle = await store.mint("note", { text: "hi" }, { user: "alice" });
 * ```
 *
 * @module
 */

export type * from "./_types.ts";
export { MemoryBackend } from "./memory/_backend.ts";
