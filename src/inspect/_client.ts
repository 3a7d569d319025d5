/**
 * The inspector's one script module, as a string (plain browser JavaScript,
 * no framework, no build step). It renders three views from the JSON API on
 * the same origin — the handles (`#/`), one handle (`#/h/<handle>`: its
 * state as a tree, its timeline) and the trash (`#/trash`) — and re-reads
 * the open view when its event stream says something changed.
 *
 * The tree is made of `<details>`/`<summary>`, so Tab, Enter and Space work
 * on every node as they do on any disclosure; a node that was left out of
 * the first read (the outline names its JSON Pointer) is read when opened.
 *
 * With `--write`, each earlier version of the timeline has a "Restore this
 * version" button that asks for a save of that version's state based on the
 * version the page shows; what came of it (restored, or refused as stale or
 * out of history) stays above the timeline, focused, until the next try or
 * another handle is opened, so a refresh from the event stream keeps it.
 *
 * @module
 */

/** The script, served as `/app.js`. */
export const CLIENT_JS: string = String.raw`"use strict";
const view = document.getElementById("view");
const who = document.getElementById("who");
const toast = document.getElementById("toast");
let info = { write: false, user: "" };
let stream = null;
let route = "";
const opened = new Set();

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "text") e.textContent = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? "" : v);
  }
  for (const kid of kids) if (kid !== null && kid !== undefined) e.append(kid);
  return e;
}

async function api(path, init) {
  const res = await fetch(path, init);
  const body = await res.json().catch(() => ({}));
  if (!res.ok) {
    const err = new Error((body.error && body.error.message) || ("HTTP " + res.status));
    err.code = body.error && body.error.code;
    err.status = res.status;
    throw err;
  }
  return body;
}

function size(n) {
  if (n === null || n === undefined) return "—";
  if (n < 1024) return n + " B";
  if (n < 1048576) return (n / 1024).toFixed(1) + " KiB";
  return (n / 1048576).toFixed(1) + " MiB";
}

function time(iso) {
  return iso ? iso.replace("T", " ").replace(/\.\d{3}Z$/, "Z") : "never";
}

let toastTimer = 0;
function say(text) {
  toast.textContent = text;
  toast.classList.add("show");
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => toast.classList.remove("show"), 1800);
}

async function copy(text, what) {
  let done = false;
  try {
    if (navigator.clipboard && window.isSecureContext) {
      await navigator.clipboard.writeText(text);
      done = true;
    }
  } catch (_) { /* fall back */ }
  if (!done) {
    const area = el("textarea", { readonly: true, "aria-hidden": "true" });
    area.value = text;
    area.style.position = "fixed";
    area.style.opacity = "0";
    document.body.append(area);
    area.select();
    try { done = document.execCommand("copy"); } catch (_) { done = false; }
    area.remove();
  }
  say(done ? "Copied " + what + ": " + text : "Copy failed; select it: " + text);
}

function copyButton(text, what) {
  return el("button", {
    type: "button", class: "copy", title: "Copy " + what + " " + text,
    "aria-label": "Copy " + what + " " + text, "data-copy": text,
    onclick: (ev) => { ev.preventDefault(); ev.stopPropagation(); copy(text, what); },
  }, "copy");
}

function listen(query) {
  if (stream) stream.close();
  stream = new EventSource("/api/events" + query);
  let first = true;
  stream.addEventListener("change", () => {
    if (first) { first = false; return; }
    render(true);
  });
  stream.addEventListener("gone", () => render(true));
}

function live() {
  return el("span", { class: "badge live", title: "Updates as other processes write" }, "live");
}

function setNav(name) {
  for (const a of document.querySelectorAll("nav a")) a.removeAttribute("aria-current");
  const a = document.getElementById("nav-" + name);
  if (a) a.setAttribute("aria-current", "page");
}

function fail(e) {
  view.replaceChildren(el("p", { class: "error", role: "alert" }, e.message));
}

// ------------------------------------------------------------------ the list

let listKind = "";
let listCursors = [null];

async function renderList(refresh) {
  setNav("handles");
  if (!refresh) listen("");
  const cursor = listCursors[listCursors.length - 1];
  const q = new URLSearchParams();
  if (listKind) q.set("kind", listKind);
  if (cursor) q.set("cursor", cursor);
  const page = await api("/api/handles?" + q);
  const filter = el("input", {
    type: "search", id: "kind", name: "kind", placeholder: "kind, e.g. research",
    "aria-label": "Filter by kind", value: listKind,
  });
  const form = el("form", {
    class: "toolbar", role: "search",
    onsubmit: (ev) => {
      ev.preventDefault();
      listKind = filter.value.trim();
      listCursors = [null];
      render(false);
    },
  }, filter, el("button", { type: "submit" }, "Filter"),
    listKind ? el("button", { type: "button", onclick: () => { listKind = ""; listCursors = [null]; render(false); } }, "Clear") : null);
  const rows = page.handles.map((h) => el("tr", { class: h.expired ? "expired" : null, "data-handle": h.handle },
    el("td", { class: "handle" }, el("a", { href: "#/h/" + encodeURIComponent(h.handle) }, h.handle), copyButton(h.handle, "handle")),
    el("td", {}, h.kind),
    el("td", { class: "num" }, String(h.version)),
    el("td", { class: "num" }, size(h.size_bytes)),
    el("td", { class: "opt" }, time(h.updated_at)),
    el("td", { class: "opt" }, h.expires_at ? time(h.expires_at) + (h.expired ? " (expired)" : "") : "never"),
    el("td", { class: "opt" }, h.last_writer || "—"),
    el("td", { class: "opt" }, h.active_lease ? h.active_lease.holder + " until " + time(h.active_lease.expires_at) : "—"),
  ));
  const table = rows.length === 0
    ? el("p", { class: "muted" }, listKind ? "No handles of kind " + listKind + "." : "No handles.")
    : el("div", { class: "table-wrap" }, el("table", {},
      el("thead", {}, el("tr", {},
        el("th", { scope: "col" }, "Handle"), el("th", { scope: "col" }, "Kind"),
        el("th", { scope: "col", class: "num" }, "Version"), el("th", { scope: "col", class: "num" }, "Size"),
        el("th", { scope: "col", class: "opt" }, "Updated"), el("th", { scope: "col", class: "opt" }, "Expires"),
        el("th", { scope: "col", class: "opt" }, "Last writer"), el("th", { scope: "col", class: "opt" }, "Lease"))),
      el("tbody", {}, ...rows)));
  const pager = el("div", { class: "pager" },
    el("button", { type: "button", disabled: listCursors.length === 1, onclick: () => { listCursors.pop(); render(false); } }, "Previous"),
    el("button", { type: "button", disabled: !page.next_cursor, onclick: () => { listCursors.push(page.next_cursor); render(false); } }, "Next"),
    el("span", { class: "muted" }, "Page " + listCursors.length));
  view.replaceChildren(el("h2", {}, "Handles of " + info.user, live()), form, table, pager);
}

// ------------------------------------------------------------------ one handle

function scalar(v) {
  if (typeof v === "string") return el("span", { class: "str" }, JSON.stringify(v));
  if (typeof v === "number") return el("span", { class: "num" }, String(v));
  return el("span", { class: "lit" }, JSON.stringify(v));
}

function jsonBytes(v) {
  return new TextEncoder().encode(JSON.stringify(v)).length;
}

function label(key, pointer, extra) {
  const parts = [];
  if (key !== null) parts.push(el("span", { class: "key" }, key), ": ");
  return [...parts, ...extra, copyButton(pointer === "" ? "/" : pointer, "path")];
}

function escapeKey(k) {
  return String(k).replace(/~/g, "~0").replace(/\//g, "~1");
}

/** A value read whole. */
function valueNode(handle, key, pointer, v, depth) {
  if (v === null || typeof v !== "object") {
    return el("li", { "data-path": pointer }, ...label(key, pointer, [scalar(v)]));
  }
  const isList = Array.isArray(v);
  const n = isList ? v.length : Object.keys(v).length;
  const d = el("details", { "data-path": pointer, open: depth < 1 || opened.has(pointer) });
  d.addEventListener("toggle", () => { if (d.open) opened.add(pointer); else opened.delete(pointer); });
  d.append(el("summary", {}, ...label(key, pointer, [
    el("span", {}, isList ? "[" + counted(n, "item") + "]" : "{" + counted(n, "key") + "}"),
    el("span", { class: "size" }, size(jsonBytes(v))),
  ])));
  const ul = el("ul");
  const entries = isList ? v.map((x, i) => [String(i), x]) : Object.entries(v);
  for (const [k, x] of entries) ul.append(valueNode(handle, k, pointer + "/" + escapeKey(k), x, depth + 1));
  d.append(ul);
  return el("li", {}, d);
}

/** "1 item", "2 items": a number and its noun. */
function counted(n, noun) {
  return n + " " + (n === 1 ? noun : noun + "s");
}

/** A node of an outline: shown whole, or described and read when opened. */
function outlineNode(handle, key, node, depth, fallbackPath) {
  if ("value" in node && !node.type) return valueNode(handle, key, fallbackPath, node.value, depth);
  const pointer = typeof node.path === "string" ? node.path : fallbackPath;
  if (node.type === "string") {
    const li = el("li", { "data-path": pointer }, ...label(key, pointer, [
      el("span", { class: "str" }, JSON.stringify(node.preview || "") .replace(/"$/, "…\"")),
      el("span", { class: "size" }, size(node.bytes)),
    ]));
    li.append(el("button", { type: "button", class: "more", onclick: () => load(handle, key, pointer, li, depth) }, "Read the whole string"));
    return li;
  }
  const isList = node.type === "list";
  const total = isList ? node.length : node.keys;
  const shown = isList ? node.items : node.entries;
  const count = shown ? Object.keys(shown).length : 0;
  const d = el("details", { "data-path": pointer, "data-lazy": "true", open: depth < 1 || opened.has(pointer) });
  d.append(el("summary", {}, ...label(key, pointer, [
    el("span", {}, isList ? "[" + counted(total, "item") + "]" : "{" + counted(total, "key") + "}"),
    el("span", { class: "size" }, size(node.bytes) + (count < total ? ", " + count + " shown" : "")),
  ])));
  const li = el("li", {}, d);
  const ul = el("ul");
  for (const [k, child] of Object.entries(shown || {})) {
    ul.append(outlineNode(handle, k, child, depth + 1, pointer + "/" + escapeKey(k)));
  }
  d.append(ul);
  if (count < total) {
    ul.append(el("li", {}, el("button", { type: "button", class: "more", onclick: () => load(handle, key, pointer, li, depth, true) },
      "Read the rest (" + (total - count) + " more)")));
  }
  let loaded = false;
  d.addEventListener("toggle", () => {
    if (d.open) opened.add(pointer); else opened.delete(pointer);
    if (d.open && count === 0 && !loaded) { loaded = true; load(handle, key, pointer, li, depth, true); }
  });
  if (d.open && count === 0) { loaded = true; queueMicrotask(() => load(handle, key, pointer, li, depth, true)); }
  return li;
}

async function load(handle, key, pointer, li, depth, open) {
  li.setAttribute("aria-busy", "true");
  try {
    const r = await api("/api/state?handle=" + encodeURIComponent(handle) + "&path=" + encodeURIComponent(pointer));
    if (open) opened.add(pointer);
    const hadFocus = li.contains(document.activeElement);
    const fresh = outlineNode(handle, key, r.node, depth, pointer);
    li.replaceWith(fresh);
    const focus = fresh.querySelector("summary, button");
    if (hadFocus && focus) focus.focus({ preventScroll: true });
  } catch (e) {
    li.append(el("span", { class: "error" }, " " + e.message));
  } finally {
    li.removeAttribute("aria-busy");
  }
}

function change(c) {
  const sign = c.kind === "added" ? "+ " : c.kind === "removed" ? "− " : "~ ";
  let text = sign + (c.path || "/");
  if (c.kind === "added") text += " = " + c.value;
  else if (c.kind === "removed") text += c.old !== undefined ? " (was " + c.old + ")" : "";
  else text += c.old !== undefined ? ": " + c.old + " → " + (c.value !== undefined ? c.value : "?") : (c.value !== undefined ? " → " + c.value : "");
  return el("li", { class: c.kind }, text);
}

/** What the last restore of a version came to: { handle, ok, text }, shown above the timeline. */
let notice = null;

function restoreAction(handle, e, t, shown) {
  if (!info.write || e.version >= shown) return null;
  if (e.version < t.restorableFrom) {
    const why = "why-" + e.version;
    return el("div", { class: "action" },
      el("button", { type: "button", disabled: true, "aria-describedby": why,
        "aria-label": "Restore version " + e.version + " as a new version" }, "Restore this version"),
      el("span", { class: "muted", id: why }, "Not restorable: the history no longer holds the way back to this version."));
  }
  return el("div", { class: "action" }, el("button", {
    type: "button", class: "restore", "data-restore": String(e.version),
    "aria-label": "Restore version " + e.version + " as a new version",
    onclick: (ev) => restoreVersion(handle, e.version, shown, ev.currentTarget),
  }, "Restore this version"));
}

async function restoreVersion(handle, version, shown, button) {
  button.disabled = true;
  notice = null;
  try {
    const r = await api("/api/restore-version", {
      method: "POST", headers: { "content-type": "application/json" },
      body: JSON.stringify({ handle, version, expect_version: shown }),
    });
    notice = { handle, ok: true, text: "Restored version " + version + " as version " + r.version + "." };
  } catch (e) {
    notice = { handle, ok: false, text: e.code === "stale_write" ? e.message : "Not restored: " + e.message };
  }
  await render(true);
  const n = document.getElementById("restore-notice");
  if (n) n.focus({ preventScroll: false });
}

function timelineView(handle, t, shown) {
  const list = el("ol", { class: "timeline", reversed: true });
  for (const e of t.entries) {
    const items = el("ul", { class: "diff" });
    for (const c of e.changes) items.append(change(c));
    if (e.more > 0) items.append(el("li", { class: "muted" }, "… and " + e.more + " more changes"));
    if (e.op === "touch") items.append(el("li", { class: "changed" }, "~ expiry → " + (e.expiresAt ? time(e.expiresAt) : "never")));
    if (e.omitted) items.append(el("li", { class: "muted" }, "too large to keep in the history"));
    if (e.event) items.append(el("li", { class: "muted" }, e.event));
    else if (e.changes.length === 0 && e.op !== "touch" && !e.omitted) items.append(el("li", { class: "muted" }, "no change to the state"));
    list.append(el("li", { "data-version": String(e.version) },
      el("div", { class: "head" }, el("span", { class: "v" }, "v" + e.version), el("span", { class: "badge" }, e.op),
        el("span", {}, e.writer || "—"), el("span", { class: "muted" }, time(e.at))),
      items, restoreAction(handle, e, t, shown)));
  }
  const kids = [el("h3", {}, "History")];
  if (notice && notice.handle === handle) {
    kids.push(el("p", { id: "restore-notice", tabindex: "-1", class: notice.ok ? "note ok" : "note error",
      role: notice.ok ? "status" : "alert" }, notice.text));
  }
  if (t.entries.length === 0) {
    kids.push(el("p", { class: "note" }, "The history holds no entry for this handle's versions: entries over the size limit or past the retention are not kept."));
  } else if (t.from > 1) {
    kids.push(el("p", { class: "note" }, "The history shown starts at version " + t.from + ": older entries are past the retention" +
      (t.replayed ? "." : ", and values a change replaced before that are not known.")));
  }
  kids.push(t.entries.length ? list : el("p", { class: "muted" }, "No entries."));
  return kids;
}

async function renderHandle(handle, refresh) {
  setNav("");
  if (!refresh) {
    opened.clear();
    notice = null;
    listen("?handle=" + encodeURIComponent(handle));
  }
  let state, history;
  try {
    [state, history] = await Promise.all([
      api("/api/state?handle=" + encodeURIComponent(handle)),
      api("/api/history?handle=" + encodeURIComponent(handle)),
    ]);
  } catch (e) {
    view.replaceChildren(el("h2", {}, handle), el("p", { class: "error", role: "alert" }, e.message),
      el("p", {}, el("a", { href: "#/" }, "Back to the handles")));
    return;
  }
  const m = state.info;
  const meta = el("dl", { class: "meta" },
    el("dt", {}, "Kind"), el("dd", {}, m.kind),
    el("dt", {}, "Version"), el("dd", { id: "version" }, String(m.version)),
    el("dt", {}, "Size"), el("dd", {}, size(state.size_bytes)),
    el("dt", {}, "Created"), el("dd", {}, time(m.created_at)),
    el("dt", {}, "Updated"), el("dd", {}, time(m.updated_at)),
    el("dt", {}, "Expires"), el("dd", {}, time(m.expires_at)),
    el("dt", {}, "Last writer"), el("dd", {}, m.last_writer || "—"),
    el("dt", {}, "Lease"), el("dd", {}, m.active_lease ? m.active_lease.holder + " until " + time(m.active_lease.expires_at) : "none"));
  const tree = el("ul");
  tree.append(outlineNode(handle, null, state.node, 0, ""));
  const focused = document.activeElement && document.activeElement.id === "restore-notice";
  view.replaceChildren(
    el("h2", {}, el("code", {}, handle), copyButton(handle, "handle"), live()),
    el("div", { class: "panes" },
      el("section", { class: "pane", "aria-label": "State" }, el("h3", {}, "State"), meta, el("div", { class: "tree" }, tree)),
      el("section", { class: "pane", "aria-label": "History" }, ...timelineView(handle, history, m.version))));
  const n = document.getElementById("restore-notice");
  if (focused && n) n.focus({ preventScroll: true });
}

// ------------------------------------------------------------------ the trash

let trashCursors = [null];

async function renderTrash(refresh) {
  setNav("trash");
  if (!refresh) listen("");
  const cursor = trashCursors[trashCursors.length - 1];
  const page = await api("/api/trash" + (cursor ? "?cursor=" + encodeURIComponent(cursor) : ""));
  const rows = page.handles.map((h) => el("tr", { "data-handle": h.handle },
    el("td", { class: "handle" }, h.handle, copyButton(h.handle, "handle")),
    el("td", {}, h.kind),
    el("td", { class: "num" }, String(h.version)),
    el("td", { class: "opt" }, time(h.updated_at)),
    el("td", {}, time(h.restorable_until)),
    el("td", { class: "opt" }, h.last_writer || "—"),
    el("td", {}, info.write
      ? el("button", { type: "button", class: "primary", onclick: (ev) => restore(h.handle, ev.target) }, "Restore")
      : el("span", { class: "muted" }, "read-only"))));
  const kids = [el("h2", {}, "Trash of " + info.user, live())];
  if (!info.write) kids.push(el("p", { class: "note" }, "Read-only: start mcpstate inspect with --write to restore."));
  kids.push(rows.length === 0 ? el("p", { class: "muted" }, "The trash is empty.") : el("div", { class: "table-wrap" }, el("table", {},
    el("thead", {}, el("tr", {},
      el("th", { scope: "col" }, "Handle"), el("th", { scope: "col" }, "Kind"), el("th", { scope: "col", class: "num" }, "Version"),
      el("th", { scope: "col", class: "opt" }, "Updated"), el("th", { scope: "col" }, "Restorable until"),
      el("th", { scope: "col", class: "opt" }, "Last writer"), el("th", { scope: "col" }, el("span", { class: "muted" }, "Action")))),
    el("tbody", {}, ...rows))));
  kids.push(el("div", { class: "pager" },
    el("button", { type: "button", disabled: trashCursors.length === 1, onclick: () => { trashCursors.pop(); render(false); } }, "Previous"),
    el("button", { type: "button", disabled: !page.next_cursor, onclick: () => { trashCursors.push(page.next_cursor); render(false); } }, "Next")));
  view.replaceChildren(...kids);
}

async function restore(handle, button) {
  button.disabled = true;
  try {
    await api("/api/restore", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ handle }) });
    say("Restored " + handle);
    await render(true);
  } catch (e) {
    button.disabled = false;
    say("Restore failed: " + e.message);
  }
}

// ------------------------------------------------------------------ routing

async function render(refresh) {
  const hash = location.hash || "#/";
  if (hash !== route) { refresh = false; route = hash; }
  try {
    if (hash.startsWith("#/h/")) await renderHandle(decodeURIComponent(hash.slice(4)), refresh);
    else if (hash === "#/trash") await renderTrash(refresh);
    else await renderList(refresh);
    if (!refresh) view.focus({ preventScroll: true });
  } catch (e) {
    fail(e);
  }
}

addEventListener("hashchange", () => render(false));
(async () => {
  try {
    info = await api("/api/info");
    who.replaceChildren("user ", el("strong", {}, info.user), info.backend ? " · " + info.backend : "", " ",
      el("span", { class: info.write ? "badge write" : "badge" }, info.write ? "write" : "read-only"));
  } catch (e) {
    fail(e);
    return;
  }
  render(false);
})();
`;
