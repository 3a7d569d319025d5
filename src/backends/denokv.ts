/**
 * The Deno KV backend (`denokv:///…`, `denokv:///:memory:`,
 * `denokv+https://…`): a local KV file, an in-memory KV, or a KV Connect
 * endpoint (Deno Deploy, or a self-hosted `denokv` server) shared by server
 * instances on different hosts.
 *
 * Deno KV limits a value to 65,536 bytes and one atomic commit to 819,200
 * bytes of mutations and 100 checks, while a state may be 1 MiB or more. So:
 *
 * - A state of up to 62 KiB lives inside its record's head key. A larger one
 *   is written first as immutable chunks of UTF-8 (keys carry a fresh id, so
 *   no reader ever sees them before they are complete), then one small
 *   atomic commit checks the head's versionstamp and swaps the head to the
 *   new chunk set. A reader reads the head, then that chunk set; when a
 *   newer write has already released it, the reader starts over.
 * - Every chunk set is announced by an intent key written with its first
 *   chunks. The head swap deletes the intent; a writer that lost a race
 *   releases its chunks at once, and `sweep` collects the chunks of a writer
 *   that crashed (intents older than `orphanAgeMs`, 5 minutes by default).
 *   The collector and the head swap both check the intent's versionstamp,
 *   so a chunk set is either adopted by a head or collected, never both.
 * - `update` (patch, touch) and `save` are optimistic: read, compute, commit
 *   with a versionstamp check, and on a conflict retry after a bounded,
 *   jittered backoff. A conflict means nothing was written, so a patch is
 *   never applied twice or lost. Writes of one record from one backend
 *   instance take turns, so only other processes and instances race.
 *   "database is locked" from another process on the same file is retried
 *   like a conflict.
 * - Listing reads metadata-only index keys ordered by `updatedAt` (newest
 *   first), written in the same commit as the head; idempotency records are
 *   written in that commit too and carry `expireIn`.
 * - Expiry is judged by the store from `expiresAt`. Expired records are
 *   reclaimed by `sweep` (the store runs it in the background), which uses
 *   an expiry index, so {@link DenoKvBackend.reclaimsExpired} is `false`.
 * - The changelog: one key per entry, `[…, "u", user, "log", handle, logId,
 *   version]`, set in the same atomic commit as the head swap of its write,
 *   so an entry never exists without its write nor a write without its
 *   entry. The head names its log (`logId`, fresh whenever a log starts) and
 *   its first live version; entries from there to the head's version are
 *   all present, and reads never look below it. Retention trims the oldest
 *   end in that same commit: entries more than `maxEntries` behind, then
 *   those older than `maxAgeMs` (the head keeps a lower bound of its
 *   entries' ages, so the log is only read when one may be too old). Up to
 *   64 trimmed entries are deleted in the commit; a longer run (after
 *   `maxEntries` was lowered, or a long idle spell) is handed to the
 *   collector and is invisible meanwhile, so `changes` never returns an
 *   entry the last append's retention let go. Age is trimmed from the
 *   oldest end only, which keeps the log contiguous (with writers' clocks
 *   skewed, an entry just past the cutoff may wait behind a younger one);
 *   as the interface defines it, a log is trimmed when it is appended to,
 *   not while it sits idle. An entry is one KV value, so its text may be
 *   65,280 bytes at most: the backend says so in
 *   {@link DenoKvBackend.maxEntryBytes}, and the store keeps a larger entry
 *   as its `omitted` marker (its own default cap is 32 KiB); the backend
 *   never reads an entry's text. A write without an entry
 *   (a store with `history: false`, an imported replacement) drops the log,
 *   which could no longer be contiguous; removing or reclaiming a record
 *   drops it too.
 * - The trash: a revoke with an undo window moves the head to a trash key in
 *   one commit (chunks and changelog stay where they are, under ids no
 *   other record uses); the handle then reads as absent but cannot be
 *   minted again. Bringing it back moves the head back in one commit that
 *   checks both keys. `sweep` purges trash past its window, with its chunks
 *   and changelog, through a trash index ordered by time.
 * - Advisory leases: one key per handle, `[…, "u", user, "l", handle]`
 *   beside the head, holding `{ holder, expiresAt }`. Taking and releasing
 *   one is a commit that checks that key's versionstamp; the head, chunks
 *   and changelog are never touched. Whether a lease is in force is judged
 *   by `expiresAt` against the store's clock; the key also carries
 *   `expireIn`, so Deno KV reclaims it once it lapses (a local KV file
 *   deletes expired keys when it is opened and about once a minute after;
 *   they stay readable until then), and `sweep` of one user drops that
 *   user's lapsed ones.
 * - Transfer: the state and changelog are copied below the new owner first,
 *   under fresh ids announced by intents (as a large write's chunks are),
 *   then one commit checks the old head's versionstamp and the absence of
 *   the new owner's head and trash entry, and swaps everything in: the new
 *   head adopting both copies (with the `transfer` entry), the old head, its
 *   index entries and lease gone (its chunks and log handed to the
 *   collector), the usage of both users, the end of every grant in force on
 *   the old handle and the grant the old owner keeps. A state or changelog
 *   of any size moves; the bound is the grants that one commit can end
 *   (see {@link DenoKvBackend.transfer}).
 * - Grant changes with history on (`share`, `unshare`) write their changelog
 *   entry in the commit that stores or ends the grant, which checks the
 *   record's head by versionstamp.
 * - Change feed: `kv.watch` on the head key of every watched handle, and
 *   this object's own commits notify at once. Measured with Deno 2.9: on a
 *   local KV file, `kv.watch` hears every `Deno.Kv` of the same process
 *   (within milliseconds) but never a commit made by another OS process on
 *   the same file, not even seconds later. So a backend not opened on a KV
 *   Connect endpoint also polls the watched heads' versionstamps
 *   (`getMany`, every 100 ms while anyone listens); a KV Connect endpoint
 *   delivers other instances' commits to `kv.watch` itself.
 *
 * `Deno.openKv` needs `--unstable-kv` (or `"unstable": ["kv"]` in
 * `deno.json`); importing this module does not.
 *
 * @example An in-memory KV you open yourself
 * ```ts
 * import { HandleStore } from "@mcpstate/core";
 * import { DenoKvBackend } from "@mcpstate/core/denokv";
 *
 * const kv = await Deno.openKv(":memory:");
 * const store = new HandleStore(new DenoKvBackend(kv));
 * const handle = await store.mint("note", { text: "hi" }, { user: "alice" });
 * await store.close();
 * kv.close(); // an injected Deno.Kv stays the caller's to close
 * ```
 *
 * @example A KV file, or a self-hosted denokv server, through a URL
 * ```ts ignore
 * import { HandleStore } from "@mcpstate/core";
 *
 * await using local = await HandleStore.fromUrl("denokv:///~/.mcpstate/state.kv");
 * // DENO_KV_ACCESS_TOKEN must hold the server's access token:
 * await using shared = await HandleStore.fromUrl("denokv+https://kv.example.com");
 * ```
 *
 * @module
 */

export type * from "./_types.ts";
export { type DenoKvTarget, parseDenoKvUrl } from "./denokv/_url.ts";
export { DenoKvBackend } from "./denokv/_backend.ts";
export type { DenoKvBackendOptions } from "./denokv/_options.ts";
