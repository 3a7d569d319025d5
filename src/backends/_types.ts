/**
 * The backend interface's types, re-exported by the backends' entry points.
 *
 * @module
 */

export type {
  Backend,
  Change,
  ChangeEntry,
  ConditionalWrite,
  HandleMeta,
  HandleRecord,
  IdempotencyClaim,
  LeaseOutcome,
  LeaseRecord,
  ListQuery,
  Replayed,
  Retention,
  SaveOutcome,
  Step,
  UpdateOutcome,
  WriteContext,
} from "../backend.ts";
