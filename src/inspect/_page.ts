/**
 * The inspector's page and its style sheet, as strings: the shell that the
 * script module (`_client.ts`) fills. No inline script or style (the page's
 * Content-Security-Policy forbids both), no font or image fetched.
 *
 * @module
 */

/**
 * The page: a header with the views, and the element each view renders into.
 *
 * @returns The HTML.
 */
export function pageHtml(): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>mcpstate inspect</title>
<link rel="stylesheet" href="/app.css">
<script type="module" src="/app.js"></script>
</head>
<body>
<header>
  <h1><a href="#/">mcpstate inspect</a></h1>
  <nav aria-label="Views">
    <a href="#/" id="nav-handles">Handles</a>
    <a href="#/trash" id="nav-trash">Trash</a>
  </nav>
  <p id="who" aria-live="polite"></p>
</header>
<main id="view" tabindex="-1"><p class="muted">Loading…</p></main>
<div id="toast" role="status" aria-live="polite"></div>
</body>
</html>
`;
}

/** The style sheet: system fonts, one column on a phone, two panes from 900 px. */
export const PAGE_CSS: string = `
:root {
  color-scheme: light dark;
  --fg: #1d2125; --muted: #5f6b76; --bg: #ffffff; --panel: #f5f7f9; --line: #d9dee3;
  --accent: #0b62c4; --add: #116329; --add-bg: #e6f4ea; --del: #a4161a; --del-bg: #fbe9eb;
  --chg: #7a4d00; --chg-bg: #fff4d6; --focus: #ff9f1c;
}
@media (prefers-color-scheme: dark) {
  :root {
    --fg: #e6e9ec; --muted: #9aa6b2; --bg: #14171a; --panel: #1c2126; --line: #2e353c;
    --accent: #6cb2ff; --add: #7ee2a0; --add-bg: #12301d; --del: #ff9aa2; --del-bg: #3a1518;
    --chg: #ffd27a; --chg-bg: #3a2c0c;
  }
}
* { box-sizing: border-box; }
html { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; }
body { margin: 0; color: var(--fg); background: var(--bg); }
a { color: var(--accent); }
code, .mono, td.handle, .tree, .diff { font-family: ui-monospace, "SF Mono", Menlo, Consolas, monospace; font-size: 13px; }
:focus-visible { outline: 3px solid var(--focus); outline-offset: 2px; border-radius: 3px; }
header { display: flex; flex-wrap: wrap; align-items: baseline; gap: .4rem 1.2rem; padding: .7rem 1rem; border-bottom: 1px solid var(--line); background: var(--panel); }
header h1 { font-size: 1.05rem; margin: 0; }
header h1 a { color: inherit; text-decoration: none; }
nav { display: flex; gap: .8rem; }
nav a[aria-current="page"] { font-weight: 600; text-decoration: none; color: var(--fg); }
#who { margin: 0 0 0 auto; color: var(--muted); font-size: .9rem; }
main { padding: 1rem; max-width: 1400px; margin: 0 auto; }
main:focus { outline: none; }
h2 { font-size: 1.1rem; margin: .2rem 0 .8rem; display: flex; gap: .5rem; align-items: center; flex-wrap: wrap; }
h3 { font-size: 1rem; margin: 0 0 .6rem; }
.muted { color: var(--muted); }
.badge { display: inline-block; padding: 0 .45rem; border-radius: 999px; font-size: .8rem; border: 1px solid var(--line); color: var(--muted); }
.badge.write { color: var(--del); border-color: var(--del); }
.badge.live { color: var(--add); border-color: var(--add); }
.toolbar { display: flex; flex-wrap: wrap; gap: .5rem; align-items: center; margin-bottom: .8rem; }
input, select, button { font: inherit; color: inherit; }
input[type="search"] { padding: .3rem .5rem; border: 1px solid var(--line); border-radius: 6px; background: var(--bg); min-width: 12rem; }
button { padding: .25rem .7rem; border: 1px solid var(--line); border-radius: 6px; background: var(--panel); cursor: pointer; }
button:hover { border-color: var(--accent); }
button:disabled { opacity: .5; cursor: default; }
button.copy { padding: 0 .4rem; font-size: .75rem; margin-left: .3rem; color: var(--muted); }
button.primary { background: var(--accent); color: var(--bg); border-color: var(--accent); }
.table-wrap { overflow-x: auto; border: 1px solid var(--line); border-radius: 8px; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; padding: .4rem .6rem; border-bottom: 1px solid var(--line); white-space: nowrap; }
th { background: var(--panel); font-weight: 600; font-size: .85rem; }
tr:last-child td { border-bottom: 0; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.expired td { color: var(--muted); }
.pager { display: flex; gap: .5rem; margin-top: .8rem; align-items: center; }
.panes { display: grid; gap: 1rem; grid-template-columns: 1fr; }
@media (min-width: 900px) { .panes { grid-template-columns: minmax(0, 1.2fr) minmax(0, 1fr); } }
section.pane { border: 1px solid var(--line); border-radius: 8px; padding: .8rem; min-width: 0; }
dl.meta { display: grid; grid-template-columns: max-content 1fr; gap: .2rem .8rem; margin: 0 0 1rem; }
dl.meta dt { color: var(--muted); }
dl.meta dd { margin: 0; overflow-wrap: anywhere; }
.tree { overflow-x: auto; }
.tree ul { list-style: none; margin: 0; padding-left: 1.1rem; border-left: 1px dotted var(--line); }
.tree > ul { padding-left: 0; border-left: 0; }
.tree li { margin: .1rem 0; }
.tree summary { cursor: pointer; }
.tree .key { color: var(--accent); }
.tree .size { color: var(--muted); font-size: .75rem; margin-left: .4rem; }
.tree .str { color: var(--add); overflow-wrap: anywhere; }
.tree .num, .tree .lit { color: var(--chg); }
.tree .more { margin: .2rem 0; }
ol.timeline { list-style: none; margin: 0; padding: 0; }
ol.timeline > li { border-left: 3px solid var(--line); padding: .2rem 0 .6rem .7rem; margin-left: .3rem; }
ol.timeline > li .head { display: flex; flex-wrap: wrap; gap: .2rem .6rem; align-items: baseline; }
ol.timeline .v { font-weight: 600; }
ul.diff { list-style: none; margin: .3rem 0 0; padding: 0; }
ul.diff li { padding: .1rem .4rem; border-radius: 4px; margin: .1rem 0; overflow-wrap: anywhere; }
ul.diff li.added { background: var(--add-bg); color: var(--add); }
ul.diff li.removed { background: var(--del-bg); color: var(--del); }
ul.diff li.changed { background: var(--chg-bg); color: var(--chg); }
.note { background: var(--panel); border: 1px solid var(--line); border-radius: 6px; padding: .5rem .7rem; margin: 0 0 .8rem; }
.note.ok { border-color: var(--add); color: var(--add); }
.note.error { border-color: var(--del); }
ol.timeline .action { display: flex; flex-wrap: wrap; gap: .2rem .6rem; align-items: baseline; margin-top: .3rem; font-size: .85rem; }
ol.timeline .action button { font-size: .85rem; padding: .1rem .6rem; }
.error { color: var(--del); }
#toast { position: fixed; bottom: 1rem; left: 50%; transform: translateX(-50%); background: var(--fg); color: var(--bg); padding: .4rem .9rem; border-radius: 6px; opacity: 0; transition: opacity .2s; pointer-events: none; max-width: 90vw; overflow-wrap: anywhere; }
#toast.show { opacity: .92; }
@media (max-width: 600px) {
  main { padding: .6rem; }
  th.opt, td.opt { display: none; }
  #who { margin-left: 0; width: 100%; }
}
`;
