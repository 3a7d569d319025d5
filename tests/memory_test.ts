import type { Backend } from "../src/backend.ts";
import { MemoryBackend } from "../src/backends/memory.ts";
import { backendContract } from "./contract.ts";

const shared = new MemoryBackend();
/** One backend shared by every store the suite opens, as processes share a database. */
const view = (): Backend =>
  new Proxy(shared, {
    get(target, name) {
      if (name === "close") return () => Promise.resolve();
      const v = Reflect.get(target, name, target);
      return typeof v === "function" ? v.bind(target) : v;
    },
  });
backendContract("memory", () => Promise.resolve(view()));
