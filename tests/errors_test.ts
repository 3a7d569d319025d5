import assert from "node:assert/strict";
import * as errors from "../src/errors.ts";
import { McpStateError } from "../src/errors.ts";
import * as mod from "../mod.ts";

/** One instance of every error class, built with typical arguments. */
const SAMPLES: Record<string, () => McpStateError> = {
  McpStateError: () => new McpStateError("internal_error", "Something failed."),
  HandleNotFound: () => new errors.HandleNotFound("note_abcdefgh"),
  HandleExpired: () => new errors.HandleExpired("note_abcdefgh", new Date(0), 7),
  StaleWrite: () => new errors.StaleWrite("note_abcdefgh", 1, { version: 2, state: {} }),
  PatchError: () => new errors.PatchError("not_a_list", "The append op needs a list.", {}),
  StateTooLarge: () => new errors.StateTooLarge(2_000_000, 1_048_576),
  InvalidArgument: () => new errors.InvalidArgument("Pass a kind.", { field: "kind" }),
  ExpectVersionRequired: () => new errors.ExpectVersionRequired("note_abcdefgh"),
  Unauthenticated: () => new errors.Unauthenticated(),
  BackendError: () => new errors.BackendError("redis://u:p@h is down"),
  InternalError: () => new errors.InternalError(new TypeError("x")),
  EncryptionError: () => errors.EncryptionError.unknownKey("k2024"),
  QuotaExceeded: () => new errors.QuotaExceeded("writes_per_minute", 60, 60, 12),
  GrantEnded: () => new errors.GrantEnded("doc_abcdefghijklmnopqrstuvwxyz", "grant_revoked"),
  PermissionDenied: () => new errors.PermissionDenied("read", "append"),
  InvalidState: () => new errors.InvalidState("note", [{ path: "/a", message: "Expected string" }]),
};

function errorClasses(module: Record<string, unknown>): [string, unknown][] {
  return Object.entries(module).filter(([, v]) =>
    typeof v === "function" && (v === McpStateError || v.prototype instanceof McpStateError)
  );
}

Deno.test("every error class has one code: e.code === e.toPayload().code", () => {
  const classes = errorClasses(errors);
  assert.deepEqual(
    classes.map(([name]) => name).sort(),
    Object.keys(SAMPLES).sort(),
    "every exported error class has a sample here",
  );
  for (const [name, make] of Object.entries(SAMPLES)) {
    const e = make();
    const cls = (errors as Record<string, unknown>)[name] as typeof McpStateError;
    assert.equal(e.constructor, cls, name);
    const payload = e.toPayload();
    assert.equal(payload.code, e.code, name);
    assert.equal(payload.message, e.message, name);
    assert.doesNotThrow(() => JSON.stringify(payload));
  }
  // mod.ts exports the same classes.
  assert.deepEqual(errorClasses(mod).map(([n]) => n).sort(), classes.map(([n]) => n).sort());
});

Deno.test("ExpectVersionRequired is its own code, exported from the library", () => {
  const e = new mod.ExpectVersionRequired("note_abcdefgh");
  assert.equal(e.code, "expect_version_required");
  assert.equal(e.toPayload().code, "expect_version_required");
  assert.equal(e.details.field, "expect_version");
  assert.equal(e.details.handle, "note_abcdefgh");
  assert.match(e.message, /expect_version/);
});

Deno.test("PatchError keeps the reason code apart from the sentence", () => {
  const e = new errors.PatchError("out_of_range", "The count is too large.", { path: "n" });
  assert.equal(e.details.reason, "out_of_range");
  assert.equal(e.reason, "out_of_range");
  assert.match(e.message, /^The count is too large\. No op of this patch was applied/);
  // A reason passed among the details never replaces the code.
  const odd = new errors.PatchError("bad_path", "Bad.", { reason: "a sentence" });
  assert.equal(odd.details.reason, "bad_path");
  // Rewrapping a message that already says nothing was applied doesn't say it twice.
  const again = new errors.PatchError("bad_path", `Op 3: ${odd.message}`);
  assert.equal(again.message.match(/No op of this patch was applied/g)?.length, 1);
});

Deno.test("QuotaExceeded names the quota, the limit and the usage, and says what to do", () => {
  const handles = new mod.QuotaExceeded("handles", 100, 100);
  assert.deepEqual(handles.toPayload(), {
    code: "quota_exceeded",
    quota: "handles",
    limit: 100,
    usage: 100,
    message: handles.message,
  });
  assert.match(handles.message, /Nothing was saved\. Delete handles/);
  const bytes = new mod.QuotaExceeded("bytes", 1000, 990);
  assert.match(bytes.message, /Shrink states .* or delete handles/);
  assert.equal(bytes.details.retry_after_seconds, undefined);
  const rate = new mod.QuotaExceeded("writes_per_minute", 60, 60, 12);
  assert.equal(rate.details.retry_after_seconds, 12);
  assert.match(rate.message, /Wait 12 seconds, then try again/);
});
