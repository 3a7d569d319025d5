/**
 * The Redis backend (`redis://`, `rediss://`, `redis+cluster://`,
 * `rediss+cluster://`): many server instances on many hosts share one Redis,
 * Valkey or Redis Cluster, which is how state follows a user across devices.
 *
 * Every write is one Lua script (EVALSHA, falling back to EVAL when the
 * server has not cached it) that touches only one user's keys, all in one
 * hash slot, so a record, its metadata and its index never disagree — not
 * even when a client dies between commands — and Redis Cluster works.
 * `read` is one `HGET`; `save` is one round trip. `update` (patch, touch)
 * runs the store's change in JavaScript on the last record seen (or a fresh
 * read) and commits it with a compare-and-set script; a conflict answers with
 * the current record, so a retry needs no extra read. Updates of one handle
 * from one process are queued, so only other processes cause retries.
 *
 * States are stored as the JSON text the store hands over, byte for byte:
 * Lua never parses them, so every number and string round-trips exactly.
 * Records expire in Redis at `expiresAt` plus the grace period, and a user's
 * index keys go with their last record; idempotency records expire after
 * 24 hours. Needs Redis 7.0 or later, or Valkey.
 *
 * A record's changelog lives in the record's own hash: the script that writes
 * the record appends the entry and trims the log, and the two expire, move to
 * the trash and are deleted together. A revoked record (with its changelog)
 * is renamed to a trash key that Redis drops at `trashUntil`; `sweep` leaves
 * the trash to that expiry.
 *
 * `transfer` is one script over both users' keys on one server; on a Redis
 * Cluster, where two users sit in two hash slots, it is five single-slot
 * scripts that keep the record live in one place at a time, and a miss on
 * the handle of either user finishes a move that a crash interrupted (see
 * `redis/_move.ts`).
 *
 * A lease is one string key beside the record (holder and expiry), which
 * Redis drops once it lapses; the record's hash keeps a copy, so that `get`
 * reads the record and its lease with one `HMGET`. The change feed is pub/sub: every script that
 * changes a record publishes its handle on the user's channel, and `subscribe`
 * listens on a second connection, opened on first use (on a cluster, PUBLISH
 * reaches every node).
 *
 * URL forms:
 * - `redis://[user:pass@]host:port/db` — one server (`rediss://`: TLS).
 * - `redis+cluster://[user:pass@]host1:7000,host2:7001` — a Redis Cluster;
 *   list one or more nodes, the rest are discovered (`rediss+cluster://`: TLS).
 *
 * Query options:
 * - `prefix` — key prefix, default `mcpstate:`.
 * - `wait=N` — a write is acknowledged only after N replicas confirmed it
 *   (`WAIT`); otherwise it fails with `backend_error` (it was applied on the
 *   primary, but a failover could lose it). Default 0.
 * - `waitTimeout` — how long a write waits for those replicas, ms, default 1000.
 * - `connectTimeout` — ms, default 5000.
 * - `timeout` — when Redis sends nothing for this long while calls wait, the
 *   connection is dropped and they fail with `backend_error`; ms, default 5000
 *   (raised above `waitTimeout` when `wait` is on).
 *
 * @example Open by URL, or inject a client you configured yourself
 * ```ts ignore
 * import { HandleStore } from "@mcpstate/core";
 * import { RedisBackend } from "@mcpstate/core/redis";
 * import { Redis } from "ioredis";
 *
 * await using a = await HandleStore.fromUrl("redis://127.0.0.1:6379/0?wait=1");
 * await using b = new HandleStore(new RedisBackend(new Redis(), { prefix: "app:" }));
 * ```
 *
 * @module
 */

export type * from "./_types.ts";
export { RedisBackend } from "./redis/_backend.ts";
export type { RedisBackendOptions } from "./redis/_options.ts";
