// The one reader of the files a user names as input (jobs, run configurations, experiment files, hostfiles,
// results to compare): what it is given may be a device, a FIFO or a file of gigabytes, by mistake or by a
// stranger's hand in a shared folder, and none of them may hang the runner or fill its memory (DESIGN.md,
// "Security"). Traces are streamed by trace/source.ts under caps of their own (--max-bytes).
import { closeSync, constants, fstatSync, openSync, readSync } from "node:fs";
import { ConfigError } from "./errors.js";
import { formatSize, parseSize } from "./size.js";

/** An input file's cap: the largest real job or experiment file is some KiB, a results file a few MiB. */
export const DEFAULT_MAX_INPUT_BYTES = 64 * 1024 ** 2;
/** Raises (or lowers) the cap, in bytes or with a suffix ("256Mi"): every rank reads it from its environment. */
export const MAX_INPUT_ENV = "SPMD_RUNNER_MAX_INPUT";

/** What a file that is not a regular one is, for messages. */
interface FileType {
  isFIFO(): boolean;
  isCharacterDevice(): boolean;
  isBlockDevice(): boolean;
  isSocket(): boolean;
  isDirectory(): boolean;
  isSymbolicLink(): boolean;
}

const KIND: [(d: FileType) => boolean, string][] = [
  [(d) => d.isFIFO(), "a FIFO"], [(d) => d.isCharacterDevice(), "a character device"], [(d) => d.isBlockDevice(), "a block device"],
  [(d) => d.isSocket(), "a socket"], [(d) => d.isDirectory(), "a folder"], [(d) => d.isSymbolicLink(), "a dangling link"],
];

export const fileKind = (d: FileType) => KIND.find(([is]) => is(d))?.[1] ?? "not a regular file";

/** The cap on one input file: DEFAULT_MAX_INPUT_BYTES, or what MAX_INPUT_ENV says. */
export function maxInputBytes(env: NodeJS.ProcessEnv = process.env): number {
  const given = env[MAX_INPUT_ENV];
  if (given === undefined || given === "") return DEFAULT_MAX_INPUT_BYTES;
  try {
    const n = parseSize(given);
    if (n > 0) return n;
  } catch {
    // said below
  }
  throw Object.assign(new Error(`${MAX_INPUT_ENV}=${JSON.stringify(given)}: expected a size in bytes above 0, like 67108864 or "256Mi"`), { exitCode: 2 });
}

const tooBig = (file: string, max: number) =>
  new ConfigError(file, "", `larger than ${formatSize(max)} (${max} bytes), the cap on an input file (${MAX_INPUT_ENV}=SIZE raises it)`);

/** "ENOENT: no such file or directory, open 'x.json'" -> the part before the repeated path. */
const reasonOf = (error: unknown) => (error as Error).message.replace(/, \w+( '.*')?$/, "");

/**
 * A regular file's bytes, at most the cap: opened without blocking (a FIFO must not hang the read), checked on
 * the opened descriptor (nothing can be swapped in between), then read to its end or one byte past the cap,
 * whichever comes first (/proc and /sys files say size 0, a growing file may pass what fstat said). A link
 * to a regular file is read as that file: jobs are often linked, and what is read is checked, not where.
 * Anything else is a ConfigError naming the file (exit 2).
 */
export function readInputFile(file: string): Buffer {
  const max = maxInputBytes();
  let fd: number;
  try {
    fd = openSync(file, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch (error) {
    throw new ConfigError(file, "", `cannot read file: ${reasonOf(error)}`);
  }
  try {
    const stat = fstatSync(fd);
    if (!stat.isFile()) throw new ConfigError(file, "", `not a regular file (${fileKind(stat)}): only regular files are read`);
    if (stat.size > max) throw tooBig(file, max);
    const chunks: Buffer[] = [];
    for (let total = 0; ;) {
      const chunk = Buffer.allocUnsafe(Math.min(max + 1 - total, Math.max(stat.size - total, 0) + 65536));
      const n = readSync(fd, chunk, 0, chunk.length, null);
      if (n === 0) return Buffer.concat(chunks, total);
      chunks.push(chunk.subarray(0, n));
      total += n;
      if (total > max) throw tooBig(file, max);
    }
  } catch (error) {
    if (error instanceof ConfigError) throw error;
    throw new ConfigError(file, "", `cannot read file: ${reasonOf(error)}`);
  } finally {
    closeSync(fd);
  }
}

/** An input file as UTF-8 text (readInputFile). */
export const readInputText = (file: string) => readInputFile(file).toString("utf8");
