/**
 * The backend interface's types, listed once: `mod.ts` and every engine's
 * entry re-export them, so that a user of one engine imports them from it.
 *
 * @module
 */

export type {
  AuditStep,
  Backend,
  Change,
  ChangeEntry,
  ConditionalWrite,
  ErasureCounts,
  ErasurePrimitives,
  FeedPrimitives,
  ForkPoint,
  GrantCheck,
  GrantPrimitives,
  GrantRecord,
  HandleMeta,
  HandleRecord,
  IdempotencyClaim,
  InsertOutcome,
  KeyPrimitives,
  LeaseOutcome,
  LeasePrimitives,
  LeaseRecord,
  ListQuery,
  QuotaLimits,
  QuotaPrimitives,
  RecordPrimitives,
  Replayed,
  Retention,
  SaveOutcome,
  Step,
  StoredKey,
  TransferContent,
  TransferOutcome,
  TransferPrimitives,
  TransferStep,
  TrashedMeta,
  TrashPrimitives,
  TrashQuery,
  UpdateOutcome,
  Usage,
  WriteContext,
} from "../backend.ts";
