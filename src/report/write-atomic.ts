import { closeSync, fsyncSync, mkdirSync, openSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import path from "node:path";

/**
 * `mkdir -p` one level at a time, from the deepest directory that exists. Node's recursive mkdir retries
 * forever (at 100% CPU, deaf to signals) on procfs and sysfs, where mkdir says ENOENT under a parent that
 * exists; here the first level that cannot be made throws, with the OS's reason.
 */
export function makeDirectory(dir: string): void {
  const missing: string[] = [];
  for (let at = path.resolve(dir); !statSync(at, { throwIfNoEntry: false }); at = path.dirname(at)) {
    missing.push(at);
    if (path.dirname(at) === at) break;
  }
  for (const d of missing.reverse()) {
    try {
      mkdirSync(d);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
    }
  }
}

/**
 * Writes via a temporary file in the same directory and a rename, so a reader (or a run that crashed
 * mid-write) only ever sees the old file or the whole new one. The data is flushed to disk before the
 * rename and the rename before returning, so a power loss cannot leave an empty file behind either.
 */
export function writeFileAtomic(file: string, content: string | Uint8Array): void {
  const dir = path.dirname(file);
  makeDirectory(dir);
  const tmp = `${file}.${process.pid}.tmp`;
  const fd = openSync(tmp, "w");
  try {
    writeFileSync(fd, content);
    fsyncSync(fd);
  } catch (err) {
    closeSync(fd);
    rmSync(tmp, { force: true });
    // A write or fsync error names no file (ENOSPC: "no space left on device, write"): say which.
    const e = err as NodeJS.ErrnoException;
    throw e.path === undefined ? Object.assign(e, { path: file, message: `${e.message} (${file})` }) : e;
  }
  closeSync(fd);
  renameSync(tmp, file);
  const dirFd = openSync(dir, "r");
  try {
    fsyncSync(dirFd);
  } finally {
    closeSync(dirFd);
  }
}
