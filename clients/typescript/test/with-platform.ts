/**
 * `npm test`: the node tests against the platform at `ORCHESTRATOR_URL` as `ORCHESTRATOR_API_TOKEN` when set, else
 * against one started here and stopped after: `orchestrator dev --app examples.polyglot.app` on a fresh data
 * folder and a free port, with a bootstrap token and no activation delay (the same command the polyglot example's
 * README gives). The `orchestrator` command is `ORCHESTRATOR_BIN`, else the repository's `.venv/bin/orchestrator`,
 * else the one on PATH. The tests that need Temporal (a worker of their own) read `ORCHESTRATOR_TEMPORAL_ADDRESS`,
 * which a platform started here sets, and are skipped without it.
 */

import { ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { createInterface } from "node:readline";

export const REPO = resolve(__dirname, "..", "..", "..", "..");
const START_SECONDS = 180;
const STOP_SECONDS = 20;

function orchestratorBin(): string {
  if (process.env.ORCHESTRATOR_BIN) return process.env.ORCHESTRATOR_BIN;
  const venv = join(REPO, ".venv", "bin", "orchestrator");
  return existsSync(venv) ? venv : "orchestrator";
}

function freePort(): Promise<number> {
  return new Promise((done, fail) => {
    const server = createServer();
    server.once("error", fail);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() => done(typeof address === "object" && address ? address.port : 0));
    });
  });
}

interface Started {
  child: ChildProcess;
  env: Record<string, string>;
  dataDir: string;
}

async function startPlatform(): Promise<Started> {
  const dataDir = mkdtempSync(join(tmpdir(), "orchestrator-ts-"));
  const port = await freePort();
  const token = `ts-tests-${randomBytes(8).toString("hex")}`;
  const child = spawn(
    orchestratorBin(),
    ["dev", "--app", "examples.polyglot.app", "--data-dir", dataDir, "--http-port", String(port), "--quiet"],
    {
      cwd: REPO,
      env: { ...process.env, ORCHESTRATOR_API_TOKEN: token, ORCHESTRATOR_LIMITS__ACTIVATION_DELAY_SECONDS: "0" },
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  const said: string[] = [];
  const env: Record<string, string> = { ORCHESTRATOR_URL: `http://127.0.0.1:${port}`, ORCHESTRATOR_API_TOKEN: token };
  const lines = createInterface({ input: child.stdout! });
  child.stderr!.on("data", (chunk: Buffer) => said.push(chunk.toString()));
  await new Promise<void>((ready, fail) => {
    const timer = setTimeout(() => fail(new Error(`the platform was not ready in ${START_SECONDS} s:\n${said.join("")}`)), START_SECONDS * 1000);
    child.once("exit", (code) => {
      clearTimeout(timer);
      fail(new Error(`orchestrator dev exited (${code}) before it was ready:\n${said.join("")}`));
    });
    lines.on("line", (line) => {
      said.push(line + "\n");
      const temporal = /^temporal\s+(\S+) \(namespace (\S+), task queue ([^)]+)\)/.exec(line);
      if (temporal) {
        env.ORCHESTRATOR_TEMPORAL_ADDRESS = temporal[1];
        env.ORCHESTRATOR_TEMPORAL_NAMESPACE = temporal[2];
        env.ORCHESTRATOR_TASK_QUEUE = temporal[3];
      }
      if (line.startsWith("Ready.")) {
        clearTimeout(timer);
        child.removeAllListeners("exit");
        ready();
      }
    });
  });
  lines.removeAllListeners("line");
  child.stdout!.resume();
  return { child, env, dataDir };
}

async function stopPlatform(started: Started): Promise<void> {
  const { child } = started;
  if (child.exitCode === null && child.signalCode === null) {
    const exited = new Promise<void>((done) => child.once("exit", () => done()));
    child.kill("SIGTERM");
    const timer = setTimeout(() => child.kill("SIGKILL"), STOP_SECONDS * 1000);
    await exited;
    clearTimeout(timer);
  }
  rmSync(started.dataDir, { recursive: true, force: true });
}

function runTests(env: Record<string, string>): Promise<number> {
  const files = readdirSync(__dirname)
    .filter((name) => name.endsWith(".test.js"))
    .sort()
    .map((name) => join(__dirname, name));
  const child = spawn(process.execPath, ["--test", ...process.argv.slice(2), ...files], {
    env: { ...process.env, ...env },
    stdio: "inherit",
  });
  return new Promise((done) => child.once("exit", (code, signal) => done(code ?? (signal ? 1 : 0))));
}

async function main(): Promise<number> {
  if (process.env.ORCHESTRATOR_URL) return runTests({});
  const started = await startPlatform();
  const stop = () => void stopPlatform(started).then(() => process.exit(130));
  process.once("SIGINT", stop);
  process.once("SIGTERM", stop);
  try {
    return await runTests(started.env);
  } finally {
    await stopPlatform(started);
  }
}

if (require.main === module) {
  main().then(
    (code) => process.exit(code),
    (err) => {
      console.error(err);
      process.exit(1);
    },
  );
}
