/**
 * The backend interface's types, which every engine's entry re-exports so
 * that a user of one engine imports them from it.
 *
 * @module
 */

export type {
  AuditStep,
  Backend,
  Change,
  ChangeEntry,
  ConditionalWrite,
  ForkPoint,
  GrantCheck,
  GrantRecord,
  HandleMeta,
  HandleRecord,
  IdempotencyClaim,
  InsertOutcome,
  LeaseOutcome,
  LeaseRecord,
  ListQuery,
  QuotaLimits,
  Replayed,
  Retention,
  SaveOutcome,
  Step,
  TransferOutcome,
  TransferStep,
  TrashedMeta,
  TrashQuery,
  UpdateOutcome,
  Usage,
  WriteContext,
} from "../backend.ts";
