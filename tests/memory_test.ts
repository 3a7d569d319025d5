import { HandleStore } from "../mod.ts";
import { MemoryBackend } from "../src/backends/memory.ts";
import { backendContract } from "./contract.ts";

const backend = new MemoryBackend();
// One backend shared by every store the suite opens, as processes share a database.
backendContract("memory", (opts) =>
  Promise.resolve(
    new HandleStore({
      insert: (...a) => backend.insert(...a),
      read: (...a) => backend.read(...a),
      save: (...a) => backend.save(...a),
      update: (...a) => backend.update(...a),
      remove: (...a) => backend.remove(...a),
      list: (...a) => backend.list(...a),
      sweep: (...a) => backend.sweep(...a),
      close: () => Promise.resolve(),
    }, opts),
  ));
