// The one writer of every file the runner makes (results, reports, CSV, npy, traces, job exports, campaign
// files, batch scripts, flight records, locks, logs of repetitions). Output often goes to a shared folder
// (/tmp, a project scratch) where another user may have planted a link or a file at the name we would use:
// nothing here opens a name that already exists, follows a link, or reuses another's file (DESIGN.md, "Security").
import { randomBytes } from "node:crypto";
import { closeSync, constants, fsyncSync, lstatSync, mkdirSync, openSync, renameSync, rmSync, statSync, writeSync } from "node:fs";
import path from "node:path";

/** O_EXCL fails on any name that exists, a link included; O_NOFOLLOW says so even where O_EXCL is ignored (NFSv2). */
const NEW_FILE = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW;

/** A file's mode where it holds nothing secret: the umask may narrow it, nobody else's file can widen it. */
export const FILE_MODE = 0o644;

/** Errors that say the path itself cannot be written (not a full or failing disk): bad input, exit 2. */
const PATH_ERRORS = new Set(["ENOENT", "ENOTDIR", "EISDIR", "EACCES", "EPERM", "EROFS", "ELOOP", "EEXIST", "ENAMETOOLONG", "EINVAL", "EXDEV"]);

/** A path the runner cannot write to: one line naming it, exit 2 (cli/index.ts maps exitCode). */
export class WriteError extends Error {
  readonly exitCode = 2;
  constructor(readonly file: string, readonly reason: string, readonly code?: string) {
    super(`cannot write ${file}: ${reason}`);
    this.name = "WriteError";
  }
}

/** The OS's reason in a Node fs error ("EROFS: read-only file system, mkdir '/x'" -> its first part). */
export function osReason(err: unknown): string {
  if (err instanceof WriteError) return err.reason;
  const e = err as NodeJS.ErrnoException;
  return e.code ? e.message.split(",")[0]! : String(e.message ?? err);
}

/**
 * A failed write as the user should see it: a path that cannot be written is a WriteError (exit 2); anything
 * else (a full disk, an I/O error: "ENOSPC: no space left on device, write", which names no file) keeps its
 * code and says which file.
 */
function writeFailure(file: string, err: unknown): Error {
  const e = err as NodeJS.ErrnoException;
  if (err instanceof WriteError || e.code === undefined) return e;
  if (PATH_ERRORS.has(e.code)) return new WriteError(file, osReason(e), e.code);
  return e.path === file ? e : Object.assign(e, { path: file, message: `${e.message} (${file})` });
}

/**
 * Refuses a link on the way to `dir` that belongs to another user (not root, not us): planted in a shared
 * folder (/tmp/pub/sub -> /root/.ssh), it would take the write elsewhere. Links of our own or root's (a
 * scratch mount's) are followed as the user meant them. The kernel's fs.protected_symlinks does this only
 * in sticky folders, and only where it is on.
 */
function checkLinks(dir: string): void {
  const uid = process.geteuid?.();
  if (uid === undefined) return;
  for (let at = path.resolve(dir); path.dirname(at) !== at; at = path.dirname(at)) {
    const s = lstatSync(at, { throwIfNoEntry: false });
    if (s?.isSymbolicLink() && s.uid !== uid && s.uid !== 0) throw new WriteError(at, `it is a link of uid ${s.uid}, another user's, which the runner does not follow: remove it`);
  }
}

/**
 * `mkdir -p` one level at a time, from the deepest directory that exists. Node's recursive mkdir retries
 * forever (at 100% CPU, deaf to signals) on procfs and sysfs, where mkdir says ENOENT under a parent that
 * exists; here the first level that cannot be made throws, with the OS's reason. mkdir never follows a link
 * at the name it makes: one planted there is an error (EEXIST and not a folder), not a way elsewhere.
 */
export function makeDirectory(dir: string): void {
  checkLinks(dir);
  const missing: string[] = [];
  for (let at = path.resolve(dir); !statSync(at, { throwIfNoEntry: false }); at = path.dirname(at)) {
    missing.push(at);
    if (path.dirname(at) === at) break;
  }
  for (const d of missing.reverse()) {
    try {
      mkdirSync(d, 0o755);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST" || !lstatSync(d).isDirectory()) throw writeFailure(d, err);
    }
  }
}

/** `file` with random bytes before `suffix`: a name no one can plant ahead of us. */
export const unguessable = (file: string, suffix: string) => `${file}.${randomBytes(8).toString("hex")}${suffix}`;

/** Creates `file`, which must not exist (not even as a link): its descriptor, open for writing. */
export function createNewFile(file: string, mode = FILE_MODE): number {
  try {
    return openSync(file, NEW_FILE, mode);
  } catch (err) {
    throw writeFailure(file, err);
  }
}

/** Whether `dir` takes a new file: one is created under an unguessable name and removed; throws why not. */
export function checkWritable(dir: string): void {
  const probe = unguessable(path.join(dir, ".spmd-probe"), "");
  closeSync(createNewFile(probe));
  rmSync(probe);
}

/**
 * Refuses `file` where it is a link or someone else's (files the runner reopens in place: campaign.db, its
 * journal, the campaign's lock): one line naming it, exit 2. Absent is fine.
 */
export function checkOwnFile(file: string): void {
  const s = lstatSync(file, { throwIfNoEntry: false });
  if (!s) return;
  if (s.isSymbolicLink()) throw new WriteError(file, "it is a link, which the runner does not follow here: remove it");
  const uid = process.geteuid?.();
  if (uid !== undefined && s.uid !== uid) throw new WriteError(file, `it belongs to uid ${s.uid}, not to this user (uid ${uid}): remove it`);
}

function writeAll(fd: number, content: string | Uint8Array): void {
  const bytes = typeof content === "string" ? Buffer.from(content) : content;
  for (let at = 0; at < bytes.length;) at += writeSync(fd, bytes, at, bytes.length - at);
}

/**
 * Writes via a new file under an unguessable name in the same directory and a rename, so a reader (or a run
 * that crashed mid-write) only ever sees the old file or the whole new one, and a link or file planted at the
 * target is replaced, never written through. The data is flushed to disk before the rename and the rename
 * before returning, so a power loss cannot leave an empty file behind either.
 */
export function writeFileAtomic(file: string, content: string | Uint8Array, mode = FILE_MODE): void {
  const dir = path.dirname(file);
  makeDirectory(dir);
  const tmp = unguessable(file, ".tmp");
  let fd: number;
  try {
    fd = openSync(tmp, NEW_FILE, mode);
  } catch (err) {
    throw writeFailure(file, err);  // the target names the problem: the temporary name means nothing to the user
  }
  const undo = (err: unknown): never => {
    rmSync(tmp, { force: true });
    throw writeFailure(file, err);
  };
  try {
    writeAll(fd, content);
    fsyncSync(fd);
  } catch (err) {
    closeSync(fd);
    undo(err);
  }
  closeSync(fd);
  try {
    renameSync(tmp, file);
  } catch (err) {
    undo(err);
  }
  const dirFd = openSync(dir, constants.O_RDONLY | constants.O_DIRECTORY);
  try {
    fsyncSync(dirFd);
  } finally {
    closeSync(dirFd);
  }
}
