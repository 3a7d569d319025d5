/**
 * `mcpstate inspect` in a real headless browser: Debian's Chromium, driven
 * by `playwright-core` over the DevTools protocol, against two real
 * `mcpstate inspect` processes (read-only and `--write`) on one SQLite file
 * that this test and a third process write to. The scenarios: the token,
 * the list, a large state, the timeline, restoring an earlier version as a
 * new save (and a stale try that changes nothing), the trash, live updates.
 *
 * One browser for the whole file, a fresh context (cookies, storage) per
 * scenario. With `MCPSTATE_SCREENSHOTS=DIR` the scenarios also save the
 * screenshots that docs/ shows.
 *
 * @module
 */

import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import { type Browser, type BrowserContext, chromium, type Page } from "playwright-core";
import { Append, DelKey, HandleStore, outline, SetKey } from "../mod.ts";
import { machineName } from "../src/server/identity.ts";
import { serveInspector } from "../src/inspect/server.ts";
import { tempHome } from "./_cli_run.ts";
import { spawnChild } from "./_child.ts";
import { chromiumPath, type RunningInspect, startInspect } from "./_inspect.ts";

// The callbacks given to page.evaluate run in the page, where these are the DOM's.
// deno-lint-ignore no-explicit-any
declare const document: any;
// deno-lint-ignore no-explicit-any
declare const navigator: any;

const SHOTS = Deno.env.get("MCPSTATE_SCREENSHOTS");
const USER = "alice";

const started = performance.now();
const home = await tempHome();
// The inspectors run with HOME=home, so they name the file as a user would.
const dbUrl = `sqlite:///${home}/.mcpstate/state.db`;
const cliDbUrl = "sqlite:///~/.mcpstate/state.db";
const store = await HandleStore.fromUrl(dbUrl, { reclaimIntervalMs: 0 });

// What the scenarios look at: 26 older handles (a second page), then the newest.
const writers = ["laptop/claude-code", "phone/claude", "desktop/cursor"];
for (let i = 0; i < 26; i++) {
  await store.mint(i % 2 ? "todo" : "note", { i, text: `item ${i}` }, {
    user: USER,
    writer: writers[i % 3]!,
    ...(i % 4 === 0 ? { ttlDays: 14 } : {}),
  });
}
const research = await store.mint("research", { title: "Runners", sources: [], notes: "" }, {
  user: USER,
  ttlDays: 30,
  writer: "laptop/claude-code",
});
await store.save(research, {
  title: "Runners",
  sources: ["https://arxiv.org/abs/2401.00001"],
  notes: "arm64 wins",
  count: 1,
}, { user: USER, expectVersion: 1, writer: "phone/claude" });
await store.patch(research, [
  Append("sources", "https://example.com/bench"),
  SetKey("", "notes", "arm64 wins, x86 close"),
  DelKey("", "count"),
], { user: USER, writer: "laptop/cursor" });
await store.lease(research, { user: USER, writer: "laptop/claude-code", seconds: 3600 });

const runs: Record<string, unknown> = {};
for (let i = 0; i < 60; i++) runs[`run${i}`] = { id: i, ok: i % 3 !== 0, log: "step ".repeat(60) };
const bigState = { title: "Nightly", runs, notes: "n".repeat(3000) };
const big = await store.mint("ci", bigState, { user: USER, writer: "ci/bot" });

const counter = await store.mint("counter", { n: 0, log: [] }, {
  user: USER,
  writer: "laptop/cli",
});
const trashed = await store.mint("draft", { text: "old draft" }, {
  user: USER,
  writer: "phone/claude",
});
await store.revoke(trashed, { user: USER });
const otherUser = await store.mint("note", { secret: true }, { user: "bob" });

// A handle written three times, whose versions the writable inspector restores.
const planV1 = { step: "draft", items: ["outline"] };
const plan = await store.mint("plan", planV1, { user: USER, writer: "laptop/claude-code" });
await store.save(plan, { step: "review", items: ["outline", "intro"] }, {
  user: USER,
  expectVersion: 1,
  writer: "phone/claude",
});
await store.patch(plan, [SetKey("", "step", "done")], { user: USER, writer: "laptop/cursor" });
// A handle whose third entry reads as an earlier release wrote it (no way back): versions 1
// and 2 are shown in the timeline but can no longer be rebuilt.
const legacy = await store.mint("plan", { n: 0 }, { user: USER, writer: "laptop/cli" });
for (let n = 1; n <= 3; n++) await store.patch(legacy, [SetKey("", "n", n)], { user: USER });
{
  using db = new DatabaseSync(`${home}/.mcpstate/state.db`);
  const { changes } = db.prepare(
    "UPDATE changes SET text = json_remove(text, '$.undo') WHERE user = ? AND handle = ? AND version = 3",
  ).run(USER, legacy);
  if (Number(changes) === 0) {
    // A small record keeps its newest entries in its row (`log_tail`: floor, then version, at,
    // text for each entry).
    const row = db.prepare("SELECT log_tail FROM handles WHERE user = ? AND handle = ?")
      .get(USER, legacy);
    const tail = JSON.parse(row!.log_tail as string) as (number | string | null)[];
    const at = tail.findIndex((v, i) => i >= 2 && (i - 2) % 3 === 0 && v === 3);
    assert.ok(at > 0);
    const { undo: _, ...entry } = JSON.parse(tail[at + 2] as string);
    tail[at + 2] = JSON.stringify(entry);
    db.prepare("UPDATE handles SET log_tail = ? WHERE user = ? AND handle = ?")
      .run(JSON.stringify(tail), USER, legacy);
  }
}

const readOnly = await startInspect(home, ["--backend", cliDbUrl, "--user", USER]);
const writable = await startInspect(home, ["--backend", cliDbUrl, "--user", USER, "--write"]);
const browser: Browser = await chromium.launch({
  executablePath: chromiumPath(),
  args: [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    // No --user-data-dir here: playwright refuses the flag and gives every
    // launch a fresh profile directory of its own, removed on close.
  ],
});
const setupMs = performance.now() - started;

type Session = Awaited<ReturnType<BrowserContext["storageState"]>>;
/** The session cookie of each inspector: its token is spent by the first login. */
const sessions = new Map<RunningInspect, Session>();

/** Logs in with the token URL in `context` and keeps the session for later contexts. */
async function login(inspect: RunningInspect, context: BrowserContext, page: Page): Promise<void> {
  const res = await page.goto(inspect.url);
  assert.equal(res?.status(), 200);
  sessions.set(inspect, await context.storageState());
}

async function session(inspect: RunningInspect): Promise<Session> {
  if (!sessions.has(inspect)) {
    const context = await browser.newContext();
    await login(inspect, context, await context.newPage());
    await context.close();
  }
  return sessions.get(inspect)!;
}

/** A fresh context (with the inspector's session cookie unless `fresh`) and a page. */
async function open(
  inspect: RunningInspect,
  fn: (page: Page, context: BrowserContext) => Promise<void>,
  viewport = { width: 1280, height: 800 },
  fresh = false,
): Promise<void> {
  const context = await browser.newContext({
    viewport,
    ...(fresh ? {} : { storageState: await session(inspect) }),
  });
  const page = await context.newPage();
  const errors: string[] = [];
  page.on("pageerror", (e) => errors.push(e.message));
  try {
    if (!fresh) await page.goto(inspect.origin + "/");
    await fn(page, context);
    assert.deepEqual(errors, [], "the page threw");
  } finally {
    await context.close();
  }
}

async function shot(page: Page, name: string): Promise<void> {
  if (SHOTS) await page.screenshot({ path: `${SHOTS}/${name}.png` });
}

/** Navigates to `url`, then asks again outside the page: the status and body the server sends. */
async function fetchAsPage(page: Page, url: string): Promise<{ status: number; body: string }> {
  const [response] = await Promise.all([
    page.waitForResponse((r) => r.url() === url),
    page.goto(url).catch(() => null), // an error page for an empty 4xx
  ]);
  // What the server sent (the page now holds Chromium's own error page).
  const again = await page.context().request.get(url, { maxRedirects: 0 });
  assert.equal(again.status(), response.status());
  return { status: response.status(), body: await again.text() };
}

/** The page's HTML once it has settled (Chromium may still be showing its own error page). */
async function settledContent(page: Page): Promise<string> {
  for (let i = 0;; i++) {
    try {
      return await page.content();
    } catch (e) {
      if (i >= 50 || !/navigating/.test(String(e))) throw e;
      await page.waitForTimeout(100);
    }
  }
}

/** Opens a handle's page and waits until it shows that handle (not the view before it). */
async function showHandle(page: Page, origin: string, handle: string): Promise<void> {
  await page.goto(`${origin}/#/h/${handle}`);
  await page.waitForFunction(
    (h) => document.querySelector("main h2 code")?.textContent === h,
    handle,
  );
}

/** Every data-handle of the rows shown. */
async function rowHandles(page: Page): Promise<string[]> {
  return await page.locator("tbody tr").evaluateAll((rows) =>
    rows.map((r) => r.getAttribute("data-handle") ?? "")
  );
}

Deno.test("inspect browser: the token opens the page and leaves the URL; without it nothing shows", async () => {
  await open(
    readOnly,
    async (page, context) => {
      // The 401 page says how to get a new link, and shows nothing of the state.
      const refused = await fetchAsPage(page, readOnly.origin + "/");
      assert.equal(refused.status, 401);
      assert.match(refused.body, /Run <code>mcpstate inspect<\/code> again for a new link/);
      const shown = await settledContent(page);
      assert.match(shown, /mcpstate inspect<\/code> again/);
      assert.ok(!shown.includes("research_"), "the refused page shows data");
      await login(readOnly, context, page);
      await page.waitForSelector("tbody tr");
      assert.equal(page.url(), readOnly.origin + "/", "the token stayed in the address bar");
      assert.match(await page.locator("#who").innerText(), /alice/);
      assert.match(await page.locator("#who").innerText(), /read-only/);
      // The token is spent: a second browser with the same URL is told to get a new link.
      const other = await browser.newContext();
      const otherPage = await other.newPage();
      const spent = await fetchAsPage(otherPage, readOnly.url);
      assert.equal(spent.status, 401);
      assert.match(spent.body, /used already/);
      assert.match(await otherPage.locator("body").innerText(), /Run mcpstate inspect again/);
      assert.ok(!spent.body.includes("research_"), "the spent link shows data");
      await other.close();
      // A reload of the spent link in the first browser is served (its cookie).
      await page.goto(readOnly.url);
      await page.waitForSelector("tbody tr");
      // A foreign Origin is refused, cookie or not.
      const foreign = await context.request.get(readOnly.origin + "/api/info", {
        headers: { Origin: "http://evil.example" },
      });
      assert.equal(foreign.status(), 403);
      const bobs = await context.request.get(`${readOnly.origin}/api/state?handle=${otherUser}`);
      assert.equal(bobs.status(), 404, "another user's handle was shown");
    },
    undefined,
    true,
  );
});

Deno.test("inspect browser: the list pages with the store's cursors and filters by kind", async () => {
  await open(readOnly, async (page) => {
    await page.waitForSelector("tbody tr");
    const first = await rowHandles(page);
    assert.equal(first.length, 25);
    const total = (await store.list(USER)).length;
    await shot(page, "inspect-list");
    await page.getByRole("button", { name: "Next" }).click();
    await page.waitForFunction(() => document.body.innerText.includes("Page 2"));
    const second = await rowHandles(page);
    assert.equal(first.length + second.length, total);
    assert.deepEqual(new Set([...first, ...second]).size, total, "a handle was listed twice");
    // Sizes, lease holders and writers are shown.
    await page.getByRole("button", { name: "Previous" }).click();
    await page.waitForFunction(() => document.body.innerText.includes("Page 1"));
    const row = page.locator(`tr[data-handle="${research}"]`);
    assert.match(await row.innerText(), /laptop\/claude-code until/);
    assert.match(await row.innerText(), /\d+ B/);
    await page.getByLabel("Filter by kind").fill("todo");
    await page.getByLabel("Filter by kind").press("Enter");
    await page.waitForFunction(() =>
      [...document.querySelectorAll("tbody tr td:nth-child(2)")].every((
        td: { textContent: string },
      ) => td.textContent === "todo")
    );
    const todos = await rowHandles(page);
    assert.equal(todos.length, 13);
    assert.ok(todos.every((h) => h.startsWith("todo_")));
  });
});

Deno.test("inspect browser: a large state opens as a tree and a path is read when asked", async () => {
  // The part the first read leaves out, as the store's outline names it.
  const o = outline(bigState, 16_384);
  assert.ok(o.truncated);
  const runsNode = (o.outline as { entries: Record<string, { entries?: Record<string, unknown> }> })
    .entries.runs!;
  const partial = Object.entries(runsNode.entries ?? {}).find(([, n]) => {
    const node = n as { keys?: number; entries?: object };
    return node.keys !== undefined && Object.keys(node.entries ?? {}).length < node.keys;
  });
  assert.ok(partial, "the test state has no partly shown run");
  const [runKey] = partial;
  await open(readOnly, async (page) => {
    await page.goto(`${readOnly.origin}/#/h/${big}`);
    await page.waitForSelector(".tree");
    const runsSummary = page.locator('details[data-path="/runs"] > summary').first();
    // Keyboard: Enter on a tree node opens it, and it holds the focus.
    await runsSummary.focus();
    await page.keyboard.press("Enter");
    await page.waitForSelector('details[data-path="/runs"][open]');
    assert.equal(await page.locator(`[data-path="/runs/${runKey}/log"]`).count(), 0);
    const asked = page.waitForRequest((r) =>
      r.url().includes("/api/state") && r.url().includes(encodeURIComponent(`/runs/${runKey}`))
    );
    const node = page.locator(`details[data-path="/runs/${runKey}"]`);
    await node.locator("> summary").click();
    await node.locator("> ul > li > button.more").click();
    await asked;
    await page.waitForSelector(`[data-path="/runs/${runKey}/log"]`);
    assert.match(await page.locator(`[data-path="/runs/${runKey}/log"]`).innerText(), /step step/);
    // Space toggles a node too.
    await runsSummary.focus();
    await page.keyboard.press("Space");
    await page.waitForSelector('details[data-path="/runs"]:not([open])');
    await page.keyboard.press("Space");
    await page.waitForSelector('details[data-path="/runs"][open]');
    await shot(page, "inspect-state");
  });
});

Deno.test("inspect browser: the timeline of a handle written three times shows each diff", async () => {
  await open(readOnly, async (page, context) => {
    await context.grantPermissions(["clipboard-read", "clipboard-write"]);
    await page.goto(`${readOnly.origin}/#/h/${research}`);
    await page.waitForSelector("ol.timeline");
    const entries = page.locator("ol.timeline > li");
    assert.deepEqual(
      await entries.evaluateAll((lis) => lis.map((li) => li.getAttribute("data-version"))),
      ["3", "2", "1"],
    );
    const v3 = await page.locator('li[data-version="3"]').innerText();
    assert.match(v3, /patch/);
    assert.match(v3, /laptop\/cursor/);
    assert.match(v3, /\+ \/sources\/1 = "https:\/\/example\.com\/bench"/);
    assert.match(v3, /~ \/notes: "arm64 wins" → "arm64 wins, x86 close"/);
    assert.match(v3, /− \/count \(was 1\)/);
    const v2 = await page.locator('li[data-version="2"]').innerText();
    assert.match(v2, /save/);
    assert.match(v2, /phone\/claude/);
    assert.match(v2, /\+ \/sources\/0 = "https:\/\/arxiv\.org\/abs\/2401\.00001"/);
    assert.match(v2, /~ \/notes: "" → "arm64 wins"/);
    const v1 = await page.locator('li[data-version="1"]').innerText();
    assert.match(v1, /mint/);
    assert.match(v1, /\+ \/title = "Runners"/);
    // One click copies a path, another the handle.
    await page.locator('[data-path="/title"] button.copy').click();
    assert.equal(await page.evaluate(() => navigator.clipboard.readText()), "/title");
    await page.locator("h2 button.copy").click();
    assert.equal(await page.evaluate(() => navigator.clipboard.readText()), research);
    // Read-only: no version is offered for restoring.
    assert.equal(await page.locator("ol.timeline .action").count(), 0);
  });
  await open(readOnly, async (page) => {
    await page.goto(`${readOnly.origin}/#/h/${research}`);
    await page.waitForSelector("ol.timeline");
    assert.ok(
      await page.evaluate(() =>
        document.documentElement.scrollWidth <= document.documentElement.clientWidth + 1
      ),
      "the page scrolls sideways at phone width",
    );
    await shot(page, "inspect-phone");
  }, { width: 390, height: 844 });
});

/** The version the handle page shows. */
async function shownVersion(page: Page, version: number): Promise<void> {
  await page.waitForFunction(
    (v) => document.getElementById("version")?.textContent === v,
    String(version),
  );
}

Deno.test("inspect browser: an earlier version restores as a new save with --write; a stale try changes nothing", async () => {
  await open(readOnly, async (page) => {
    await showHandle(page, readOnly.origin, plan);
    await page.waitForSelector('li[data-version="1"]');
    assert.equal(await page.locator("ol.timeline .action").count(), 0);
    const status = await page.evaluate(async (handle) => {
      const res = await fetch("/api/restore-version", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ handle, version: 1, expect_version: 3 }),
      });
      return res.status;
    }, plan);
    assert.equal(status, 403);
    assert.equal((await store.get(plan, { user: USER })).version, 3, "a read-only inspector saved");
  });
  await open(writable, async (page) => {
    await showHandle(page, writable.origin, research);
    await page.waitForSelector('li[data-version="1"] button.restore');
    await shot(page, "inspect-timeline");
    await showHandle(page, writable.origin, plan);
    await page.waitForSelector('li[data-version="1"] button.restore');
    // Every version but the current one, and only those, can be restored.
    assert.deepEqual(
      await page.locator("button.restore").evaluateAll((bs) =>
        bs.map((b) => b.getAttribute("data-restore"))
      ),
      ["2", "1"],
    );
    // Keyboard: Enter on the focused button restores version 1 as version 4.
    await page.locator('li[data-version="1"] button.restore').focus();
    await page.keyboard.press("Enter");
    await shownVersion(page, 4);
    const notice = page.locator("#restore-notice");
    assert.equal(await notice.innerText(), "Restored version 1 as version 4.");
    // The outcome takes the focus (a refresh from the event stream may draw it a moment before).
    await page.waitForFunction(() => document.activeElement?.id === "restore-notice");
    const now = await store.get(plan, { user: USER });
    assert.equal(now.version, 4);
    assert.deepEqual(now.state, planV1);
    const log = await store.changesSince(plan, 3, { user: USER });
    assert.ok(!log.truncated);
    assert.equal(log.changes.length, 1);
    assert.equal(log.changes[0]!.writer, `inspect/${machineName()}`);
    assert.equal(log.changes[0]!.op, "save");
    assert.match(
      await page.locator('li[data-version="4"]').innerText(),
      new RegExp(`inspect/${machineName()}`),
    );

    // Stale: another writer saves version 5 while the page still shows 4.
    const elsewhere = { step: "shipped", items: [] };
    await page.route("**/api/restore-version", async (route) => {
      await store.save(plan, elsewhere, { user: USER, expectVersion: 4, writer: "desktop/cursor" });
      await route.continue();
    });
    await page.locator('li[data-version="2"] button.restore').click();
    await page.waitForFunction(() =>
      document.getElementById("restore-notice")?.textContent?.startsWith("Not restored")
    );
    await page.unroute("**/api/restore-version");
    await shownVersion(page, 5);
    assert.match(
      await notice.innerText(),
      /^Not restored: version 5 was written by desktop\/cursor after the version 4 this page showed, and nothing was changed\./,
    );
    assert.equal(await notice.getAttribute("role"), "alert");
    const after = await store.get(plan, { user: USER });
    assert.equal(after.version, 5, "the stale restore saved");
    assert.deepEqual(after.state, elsewhere);
    assert.equal(await page.locator('li[data-version="6"]').count(), 0);

    // A version the history no longer reaches back to: the button is disabled, with the reason.
    await showHandle(page, writable.origin, legacy);
    await page.waitForSelector('li[data-version="1"] .action');
    for (const v of ["1", "2"]) {
      const action = page.locator(`li[data-version="${v}"] .action`);
      assert.ok(await action.locator("button").isDisabled(), `version ${v} is offered`);
      assert.match(await action.innerText(), /Not restorable: the history no longer holds/);
    }
    assert.ok(await page.locator('li[data-version="3"] button.restore').isEnabled());
    assert.equal(await page.locator('li[data-version="4"] .action').count(), 0);
  });
});

Deno.test("inspect browser: the trash restores with --write, and only with it", async () => {
  await open(readOnly, async (page) => {
    await page.goto(`${readOnly.origin}/#/trash`);
    await page.waitForSelector(`tr[data-handle="${trashed}"]`);
    assert.equal(await page.getByRole("button", { name: "Restore" }).count(), 0);
    assert.match(await page.locator("main").innerText(), /Read-only/);
    const status = await page.evaluate(async (handle) => {
      const res = await fetch("/api/restore", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ handle }),
      });
      return res.status;
    }, trashed);
    assert.equal(status, 403);
    assert.equal((await store.trash(USER)).handles.length, 1, "a read-only inspector restored");
  });
  await open(writable, async (page) => {
    await page.goto(`${writable.origin}/#/trash`);
    const row = page.locator(`tr[data-handle="${trashed}"]`);
    await row.waitFor();
    assert.match(await row.innerText(), /draft/);
    await shot(page, "inspect-trash");
    await row.getByRole("button", { name: "Restore" }).click();
    await page.waitForSelector(`tr[data-handle="${trashed}"]`, { state: "detached" });
    const back = await store.get(trashed, { user: USER });
    assert.deepEqual(back.state, { text: "old draft" });
    assert.equal(back.version, 1);
  });
});

/** Increments `n` of `handle` once from another OS process (writer `child`). */
async function writeFromAnotherProcess(handle: string): Promise<number> {
  const child = spawnChild(["patch", dbUrl, USER, handle]);
  try {
    assert.equal(await child.line("the child's ready line"), "ready");
    await child.send("go");
    await child.line("the child's patch");
    await child.succeeded();
  } finally {
    child.kill();
  }
  return performance.now();
}

Deno.test("inspect browser: a write from another process appears without a reload", async () => {
  await open(readOnly, async (page) => {
    await page.goto(`${readOnly.origin}/#/h/${counter}`);
    await page.waitForSelector("#version");
    assert.equal(await page.locator("#version").innerText(), "1");
    await page.evaluate(() => (window as unknown as { marker: number }).marker = 1);
    await page.waitForTimeout(300); // the event stream is open
    const wrote = await writeFromAnotherProcess(counter);
    await page.waitForFunction(() => document.getElementById("version")?.textContent === "2");
    const handleMs = performance.now() - wrote;
    assert.match(await page.locator('li[data-version="2"]').innerText(), /child/);
    assert.equal(
      await page.evaluate(() => (window as unknown as { marker?: number }).marker),
      1,
      "the page was reloaded",
    );
    // The list hears of it too (its stream polls the first page).
    await page.goto(`${readOnly.origin}/#/`);
    await page.waitForSelector(`tr[data-handle="${counter}"]`);
    await page.waitForTimeout(300);
    const wroteAgain = await writeFromAnotherProcess(counter);
    await page.waitForFunction(
      (h) => document.querySelector(`tr[data-handle="${h}"] td:nth-child(3)`)?.textContent === "3",
      counter,
    );
    const listMs = performance.now() - wroteAgain;
    console.log(
      `  another process's write reached the page in ${handleMs.toFixed(0)} ms (handle view, ` +
        `change feed) and ${listMs.toFixed(0)} ms (list, 1 s poll)`,
    );
  });
});

Deno.test("inspect browser: the tree counts one item and one key in the singular", async () => {
  await using solo = await HandleStore.fromUrl("memory://", { reclaimIntervalMs: 0 });
  const h = await solo.mint("single", { one: ["x"], map: { k: 1 }, two: [1, 2] }, {
    user: "solo",
  });
  const serving = serveInspector(solo, { user: "solo", writer: "inspect/test", write: false });
  const context = await browser.newContext();
  try {
    const page = await context.newPage();
    assert.equal((await page.goto(serving.url))?.status(), 200);
    await page.goto(`${new URL(serving.url).origin}/#/h/${h}`);
    await page.waitForSelector('details[data-path="/one"]');
    const summary = (path: string) =>
      page.locator(`details[data-path="${path}"] > summary`).first().innerText();
    assert.match(await summary("/one"), /\[1 item\]/);
    assert.match(await summary("/map"), /\{1 key\}/);
    assert.match(await summary("/two"), /\[2 items\]/);
    assert.match(await summary(""), /\{3 keys\}/);
  } finally {
    await context.close();
    await serving.close();
  }
});

Deno.test("inspect browser: close the browser and the inspectors", async () => {
  await browser.close();
  for (const inspect of [readOnly, writable]) {
    const { code, stderr } = await inspect.stop();
    assert.equal(code, 0, stderr);
  }
  await store.close();
  await Deno.remove(home, { recursive: true });
  console.log(
    `  setup (seed, two inspectors, browser) ${setupMs.toFixed(0)} ms; whole file ${
      (performance.now() - started).toFixed(0)
    } ms`,
  );
});
