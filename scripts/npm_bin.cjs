#!/usr/bin/env node
// The `mcpstate` command of the npm package `mcpstate`.
//
// Runs the bundled CLI (`lib/cli.js`) on the Deno binary that the package's
// pinned `deno` dependency ships, with exactly the program's permission flags
// (written in below by `deno task npm` from src/cli/permissions.ts). Standard
// input, output and error are the caller's; the exit code, and a signal that
// ends the program, pass through. Nothing is fetched at run time: after
// `npm install` it works offline.
"use strict";

const { spawn } = require("node:child_process");
const { existsSync } = require("node:fs");
const { constants } = require("node:os");
const { dirname, join } = require("node:path");

/** `deno run` flags: the program's permissions, filled in by `deno task npm`. */
const DENO_FLAGS = /* DENO_FLAGS */ [];

const CLI = join(__dirname, "..", "lib", "cli.js");

/** The Deno executable of the `deno` dependency. */
function denoPath() {
  const exe = process.platform === "win32" ? "deno.exe" : "deno";
  const pkg = dirname(require.resolve("deno/package.json"));
  // The `deno` package's install script copies the binary of this platform here.
  const copied = join(pkg, exe);
  if (existsSync(copied)) return copied;
  // Installed with --ignore-scripts: the binary is still in the platform package.
  return require("deno/install_api.cjs").runInstall();
}

let deno;
try {
  deno = denoPath();
} catch (e) {
  console.error(
    `mcpstate: the Deno runtime of this package is missing (${e && e.message}). ` +
      "Install mcpstate again (npm install mcpstate), without --no-optional.",
  );
  process.exit(1);
}

const child = spawn(
  deno,
  ["run", ...DENO_FLAGS, "--no-config", "--no-lock", CLI, ...process.argv.slice(2)],
  {
    stdio: "inherit",
    env: { DENO_NO_UPDATE_CHECK: "1", ...process.env },
    windowsHide: true,
  },
);

const SIGNALS = process.platform === "win32"
  ? ["SIGINT", "SIGTERM"]
  : ["SIGINT", "SIGTERM", "SIGHUP"];
const forward = (signal) => {
  if (child.exitCode === null && child.signalCode === null) child.kill(signal);
};
for (const signal of SIGNALS) process.on(signal, forward);

child.on("error", (e) => {
  console.error(`mcpstate: cannot start ${deno}: ${e.message}`);
  process.exit(1);
});

child.on("exit", (code, signal) => {
  for (const s of SIGNALS) process.off(s, forward);
  if (signal) {
    // End the same way, so that the caller sees the signal.
    process.kill(process.pid, signal);
    process.exit(128 + (constants.signals[signal] || 1));
  }
  process.exit(code === null ? 1 : code);
});
