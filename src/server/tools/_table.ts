/**
 * Every mcpstate tool, in the order a server registers them and
 * `tools/list` shows them.
 *
 * @module
 */

import type { Tool } from "./_tool.ts";
import { save } from "./_save.ts";
import { load } from "./_load.ts";
import { list } from "./_list.ts";
import { patch } from "./_patch.ts";
import { touch } from "./_touch.ts";
import { share } from "./_share.ts";
import { del } from "./_delete.ts";
import { changes } from "./_changes.ts";
import { restore } from "./_restore.ts";
import { lease } from "./_lease.ts";
import { fork } from "./_fork.ts";
import { merge } from "./_merge.ts";

/** The tools, in registration order. */
export const TOOLS: readonly Tool[] = [
  save,
  load,
  list,
  patch,
  touch,
  share,
  del,
  changes,
  restore,
  lease,
  fork,
  merge,
] as readonly Tool[];
