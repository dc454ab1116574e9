// A temporary directory for one test's files, removed however the test ends.
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";

/** Runs `body(dir)` in a fresh directory under the OS's temp dir named `prefix`...; removes it afterwards. */
export async function withTempDir(prefix, body) {
  const dir = mkdtempSync(path.join(os.tmpdir(), prefix));
  try {
    return await body(dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
