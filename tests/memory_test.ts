/**
 * The memory backend: the contract suite on one `MemoryBackend` shared by
 * every store the suite opens, as processes share a database.
 *
 * @module
 */

import { MemoryBackend } from "../src/backends/memory.ts";
import { backendContract, sharedView } from "./contract/mod.ts";

const shared = new MemoryBackend();
Deno.test("contract: memory", (t) =>
  backendContract(t, { open: () => Promise.resolve(sharedView(shared)) }));
