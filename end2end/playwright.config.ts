// Browser tests for lastword. The server under test is the binary cargo-leptos built, started
// here on a fresh SQLite data directory (or on E2E_DATABASE_URL when set), so every run begins
// from an empty database. Chromium is Debian's (/usr/bin/chromium): Playwright's own browser
// download is not reachable from these machines.
import { defineConfig, devices } from "@playwright/test";
import { execFileSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";

const port = Number(process.env.E2E_PORT ?? 3100);
const baseURL = `http://127.0.0.1:${port}`;
const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "lastword-e2e-"));
const repoRoot = path.resolve(__dirname, "..");
const binary = process.env.LASTWORD_BIN ?? path.join(repoRoot, "target", "debug", "lastword");

// A second dashboard server on the same database, in users mode: a viewer and an operator
// who sign in with the login form (the first server is local mode: one operator, no login).
// Exported for the specs through E2E_USERS_URL.
export const usersPort = port + 1;
const hash = (password: string) =>
  execFileSync(binary, ["hash-password"], { input: `${password}\n` }).toString().trim();
const usersToml = fs.existsSync(binary)
  ? `
[[user]]
name = "vera"
role = "viewer"
password_hash = "${hash("vera-pw")}"

[[user]]
name = "oscar"
role = "operator"
password_hash = "${hash("oscar-pw")}"
`
  : "";
process.env.E2E_USERS_URL = `http://127.0.0.1:${usersPort}`;
// Both servers: E2E_DATABASE_URL runs the suite against PostgreSQL (scripts/test does both),
// else the SQLite file in one fresh data directory.
const serverEnv = {
  ...(process.env.E2E_DATABASE_URL ? { DATABASE_URL: process.env.E2E_DATABASE_URL } : {}),
  LASTWORD_DATA_DIR: dataDir,
  LEPTOS_SITE_ROOT: path.join(repoRoot, "target", "site"),
  RUST_LOG: process.env.RUST_LOG ?? "warn",
};

// A third server, on a database of its own holding a constructed history (always SQLite, on
// both runs of the suite: the history is loaded with the sqlite3 CLI before the server starts):
// 5 000 runs by 200 workers and a task re-claimed twice across three workers, for the
// timeline's scale and connector tests (end2end/fixtures/timeline-scale.sql).
export const scalePort = port + 2;
// Made once, by the main process: each test worker evaluates this file again and inherits it.
const scaleDir = process.env.E2E_SCALE_DIR ?? fs.mkdtempSync(path.join(os.tmpdir(), "lastword-e2e-scale-"));
process.env.E2E_SCALE_DIR = scaleDir;
process.env.E2E_SCALE_URL = `http://127.0.0.1:${scalePort}`;
// Its database, for a spec that writes a run while watching the page redraw.
process.env.E2E_SCALE_DB = path.join(scaleDir, "lastword.db");
const scaleEnv = {
  LASTWORD_DATA_DIR: scaleDir,
  LEPTOS_SITE_ROOT: path.join(repoRoot, "target", "site"),
  RUST_LOG: process.env.RUST_LOG ?? "warn",
};
const scaleFixture = path.join(repoRoot, "end2end", "fixtures", "timeline-scale.sql");

// A fourth, on hostile runner data (end2end/fixtures/hostile.sql: 300 000-character tokens,
// markup and script in every runner-written field), for hostile.spec.ts. SQLite on both runs.
export const hostilePort = port + 3;
const hostileDir = fs.mkdtempSync(path.join(os.tmpdir(), "lastword-e2e-hostile-"));
process.env.E2E_HOSTILE_URL = `http://127.0.0.1:${hostilePort}`;
const hostileEnv = { ...scaleEnv, LASTWORD_DATA_DIR: hostileDir };
const hostileFixture = path.join(repoRoot, "end2end", "fixtures", "hostile.sql");

const chromium = {
  ...devices["Desktop Chrome"],
  launchOptions: {
    executablePath: process.env.CHROMIUM_PATH ?? "/usr/bin/chromium",
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      "--no-first-run",
    ],
  },
};

export default defineConfig({
  testDir: "./tests",
  timeout: 30_000,
  expect: { timeout: 10_000 },
  fullyParallel: false,
  workers: 1,
  retries: 0,
  reporter: [["list"]],
  use: { baseURL, trace: "retain-on-failure" },
  projects: [
    { name: "hydrated", use: { ...chromium } },
    // The server-rendered pages must be readable with JavaScript off.
    { name: "no-js", use: { ...chromium, javaScriptEnabled: false }, grep: /@nojs/ },
  ],
  webServer: [
    {
      // The demo fleet writes while the tests run: its scripted opening produces one run of each
      // kind within seconds, so every page has something to show and live updates have a source.
      command: `${binary} serve --addr 127.0.0.1:${port} --demo --seed 1 --lease 3s`,
      cwd: repoRoot,
      url: `${baseURL}/readyz`,
      timeout: 120_000,
      reuseExistingServer: false,
      stdout: "pipe",
      stderr: "pipe",
      env: serverEnv,
    },
    {
      // Same database (the SQLite file in the same data directory, or the same PostgreSQL).
      command: `${binary} serve --addr 127.0.0.1:${usersPort} --auth users`,
      cwd: repoRoot,
      url: `http://127.0.0.1:${usersPort}/readyz`,
      timeout: 120_000,
      reuseExistingServer: false,
      stdout: "pipe",
      stderr: "pipe",
      env: { ...serverEnv, LASTWORD_USERS: usersToml },
    },
    {
      command: `${binary} migrate && sqlite3 ${path.join(scaleDir, "lastword.db")} < ${scaleFixture} && exec ${binary} serve --addr 127.0.0.1:${scalePort}`,
      cwd: repoRoot,
      url: `http://127.0.0.1:${scalePort}/readyz`,
      timeout: 120_000,
      reuseExistingServer: false,
      stdout: "pipe",
      stderr: "pipe",
      env: scaleEnv,
    },
    {
      command: `${binary} migrate && sqlite3 ${path.join(hostileDir, "lastword.db")} < ${hostileFixture} && exec ${binary} serve --addr 127.0.0.1:${hostilePort} --trace-url-template 'https://tracer.example/trace/{trace_id}'`,
      cwd: repoRoot,
      url: `http://127.0.0.1:${hostilePort}/readyz`,
      timeout: 120_000,
      reuseExistingServer: false,
      stdout: "pipe",
      stderr: "pipe",
      env: hostileEnv,
    },
  ],
});
