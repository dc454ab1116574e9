import { mkdirSync, renameSync, writeFileSync } from "node:fs";
import path from "node:path";

/** Writes via a temporary file and a rename, so a crash never leaves a half-written result. */
export function writeFileAtomic(file: string, content: string | Uint8Array): void {
  mkdirSync(path.dirname(file), { recursive: true });
  const tmp = `${file}.${process.pid}.tmp`;
  writeFileSync(tmp, content);
  renameSync(tmp, file);
}
