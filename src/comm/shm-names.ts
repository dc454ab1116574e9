// The shm segments' names, /spmd-<creator's pid>-<12 hex>, and the sweep of those that killed start-ups left. A
// name lives only while a job starts: its creator unlinks it once every rank has attached, and at exit or at a
// signal before that. Only a creator killed outright in between (kill -9, the OOM killer) leaves it, and with it
// the whole segment in /dev/shm until the machine restarts (32 MiB at W=2); enough of them and the next job finds
// no room.
import { randomBytes } from "node:crypto";
import { lstatSync, readdirSync, unlinkSync } from "node:fs";
import path from "node:path";

/** Where glibc's shm_open puts the names. */
export const SHM_DIR = "/dev/shm";
const NAME = /^spmd-(\d+)-[0-9a-f]{12}$/;
/**
 * Untouched this long, a name is no start-up's: ranks wait a minute for each other by default. Its creator's pid
 * alone would not do: in a container that shares /dev/shm but not the pid namespace, a live creator looks gone.
 */
export const STALE_MS = 10 * 60_000;

/** A fresh name for a segment this process creates. */
export const segmentName = () => `/spmd-${process.pid}-${randomBytes(6).toString("hex")}`;

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code !== "ESRCH";
  }
}

/** This user's plain files in `dir` named so whose creator is gone and that nobody touched for STALE_MS, unlinked: their names and bytes. */
export function sweepStaleSegments(dir = SHM_DIR, now = Date.now()): { names: string[]; bytes: number } {
  const swept = { names: [] as string[], bytes: 0 };
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return swept;
  }
  for (const name of names) {
    const m = NAME.exec(name);
    if (!m || alive(Number(m[1]))) continue;
    try {
      // The entry itself, not what a link names: only a plain file of this user's is a segment of ours.
      const st = lstatSync(path.join(dir, name));
      if (!st.isFile() || st.uid !== process.getuid?.() || now - st.mtimeMs < STALE_MS) continue;
      unlinkSync(path.join(dir, name));
      swept.names.push(name);
      swept.bytes += st.size;
    } catch {
      // Gone meanwhile: another job's sweep took it first.
    }
  }
  return swept;
}

/** The warning a sweep gives, "" where it found nothing. */
export function sweptNote({ names, bytes }: { names: string[]; bytes: number }, dir = SHM_DIR): string {
  if (!names.length) return "";
  const shown = names.slice(0, 3).join(", ") + (names.length > 3 ? ` and ${names.length - 3} more` : "");
  return `removed ${names.length} shared-memory segment${names.length > 1 ? "s" : ""} (${(bytes / 2 ** 20).toFixed(1)} MiB) from ${dir} that start-ups killed outright had left: ${shown}`;
}
