// Trace files in, their bytes out as a stream: files and folders (regular files only), gzip decompressed as it
// streams with the decompressed total capped, and the members of .tar/.tar.gz/.tgz archives read in place
// (nothing is unpacked to disk). Nothing here holds a whole trace in memory.
import { constants, type Dirent } from "node:fs";
import { open, readdir } from "node:fs/promises";
import path from "node:path";
import { createGunzip } from "node:zlib";
import { fileKind } from "../config/read-input.js";
import { MAX_FILES } from "./limits.js";
import { TraceError } from "./model.js";

/** The names a folder's trace files have; other files in it are left alone. */
export const TRACE_NAME = /\.(json(\.gz)?|et|tar|tar\.gz|tgz)$/i;

/** One trace's bytes as they arrive, and the name messages give it (an archive member: "a.tgz:rank0.json"). */
export interface TraceBytes {
  name: string;
  /** A hint from the name: ".et" is Chakra protobuf; the content decides the rest. */
  chakra: boolean;
  chunks: AsyncIterable<Buffer>;
}

/** A folder's entries; undefined where `p` is a file; one line (exit 2) where it cannot be read. */
export async function folderEntries(p: string): Promise<Dirent[] | undefined> {
  try {
    return await readdir(p, { withFileTypes: true });
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "ENOENT") throw new TraceError(p, "cannot read: no such file or folder");
    if (code !== "ENOTDIR") throw new TraceError(p, `cannot read: ${(error as Error).message}`);
    return undefined;
  }
}

/** The files named: a folder stands for its trace files (sorted), each of which must be a regular file. */
export async function traceFiles(paths: readonly string[]): Promise<string[]> {
  const files: string[] = [];
  for (const p of paths) {
    const entries = await folderEntries(p);
    if (!entries) {
      files.push(p);
      continue;
    }
    const named = entries.filter((e) => TRACE_NAME.test(e.name)).map((e) => e.name).sort();
    if (named.length === 0) throw new TraceError(p, "the folder holds no trace files (.json, .json.gz, .et, .tar, .tar.gz, .tgz)");
    files.push(...named.map((f) => path.join(p, f)));
    if (files.length > MAX_FILES) throw new TraceError(p, `more than ${MAX_FILES} trace files`);
  }
  return files;
}

/**
 * A file's bytes, opened without blocking (a FIFO must not hang the import) and read only where it is a regular
 * file: the check is made on the opened descriptor, so the file cannot be swapped for another in between.
 */
async function* fileChunks(file: string): AsyncGenerator<Buffer> {
  let handle;
  try {
    handle = await open(file, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    throw new TraceError(file, `cannot read: ${code === "ENOENT" ? "no such file (a dangling link?)" : code === "EACCES" ? "permission denied" : (error as Error).message}`);
  }
  try {
    const stat = await handle.stat();
    if (!stat.isFile()) throw new TraceError(file, `not a regular file (${fileKind(stat)}): only regular files are read as traces`);
    for await (const chunk of handle.createReadStream({ highWaterMark: 1 << 20, autoClose: false })) yield chunk as Buffer;
  } finally {
    await handle.close();
  }
}

/** Counts bytes through, refusing more than `max` (the decompressed-size cap). */
async function* capped(chunks: AsyncIterable<Buffer>, name: string, max: number, what: string): AsyncGenerator<Buffer> {
  let total = 0;
  for await (const chunk of chunks) {
    total += chunk.length;
    if (total > max) throw new TraceError(name, `${what} more than ${max} bytes, the cap on a trace's size (--max-bytes raises it)`);
    yield chunk;
  }
}

/** gzip decompressed as it streams (several members, as `cat a.gz b.gz` makes, included). */
async function* gunzip(chunks: AsyncIterable<Buffer>, name: string): AsyncGenerator<Buffer> {
  const z = createGunzip({ chunkSize: 1 << 16 });
  // Fed from here; stops when the reader stops (z destroyed), and a failure upstream becomes the reader's.
  const feed = (async () => {
    try {
      for await (const c of chunks) {
        if (z.destroyed) break;
        if (!z.write(c)) {
          await new Promise<void>((resolve) => {
            const done = () => {
              z.off("drain", done);
              z.off("close", done);
              resolve();
            };
            z.on("drain", done);
            z.on("close", done);
          });
        }
        if (z.destroyed) break;
      }
      if (!z.destroyed) z.end();
    } catch (error) {
      z.destroy(error as Error);
    }
  })();
  try {
    for await (const out of z) yield out as Buffer;
  } catch (error) {
    if (error instanceof TraceError) throw error;
    const code = (error as NodeJS.ErrnoException).code;
    throw new TraceError(name, code === "Z_BUF_ERROR" ? "truncated gzip (the file ends before its compressed data does)" : `bad gzip data: ${(error as Error).message}`);
  } finally {
    z.destroy();
    await feed;
  }
}

/** The first bytes of a stream, and the stream again from its start. */
export async function peek(chunks: AsyncIterable<Buffer>, n: number): Promise<{ head: Buffer; chunks: AsyncIterable<Buffer> }> {
  const it = chunks[Symbol.asyncIterator]();
  const seen: Buffer[] = [];
  let have = 0;
  let done = false;
  while (have < n) {
    const r = await it.next();
    if (r.done) {
      done = true;
      break;
    }
    seen.push(r.value);
    have += r.value.length;
  }
  const head = Buffer.concat(seen).subarray(0, n);
  async function* again(): AsyncGenerator<Buffer> {
    yield* seen;
    if (done) return;
    for (;;) {
      const r = await it.next();
      if (r.done) return;
      yield r.value;
    }
  }
  return { head, chunks: again() };
}

const isGzip = (b: Buffer) => b.length >= 2 && b[0] === 0x1f && b[1] === 0x8b;
const isTar = (b: Buffer) => b.length >= 262 && b.toString("latin1", 257, 262) === "ustar";

/**
 * Every trace in the files named, in order: a plain or gzipped file is one trace, an archive is its trace
 * members. `visit` gets each trace's bytes and must consume them before returning.
 */
export async function forEachTrace(files: readonly string[], maxBytes: number, visit: (t: TraceBytes) => Promise<void>): Promise<void> {
  for (const file of files) {
    const plain = await maybeGunzip(capped(fileChunks(file), file, maxBytes, "it holds"), file, maxBytes);
    const head = await peek(plain, 262);
    if (isTar(head.head)) {
      await forEachMember(file, head.chunks, async (m) => visit({ ...m, chunks: await maybeGunzip(m.chunks, m.name, maxBytes) }));
      continue;
    }
    await visit({ name: file, chakra: /\.et$/i.test(file.replace(/\.gz$/i, "")), chunks: head.chunks });
  }
}

/** The stream decompressed where it is gzip, capped at `maxBytes` decompressed. */
async function maybeGunzip(chunks: AsyncIterable<Buffer>, name: string, maxBytes: number): Promise<AsyncIterable<Buffer>> {
  const first = await peek(chunks, 2);
  return isGzip(first.head) ? capped(gunzip(first.chunks, name), name, maxBytes, "it decompresses to") : first.chunks;
}

/** The regular trace members of a tar stream, each streamed to `visit` in turn. */
async function forEachMember(archive: string, chunks: AsyncIterable<Buffer>, visit: (t: TraceBytes) => Promise<void>): Promise<void> {
  const { Parser } = await import("tar");
  // Entries arrive from the parser's callbacks; each one's data is queued and handed to `visit` as a stream.
  type Member = { name: string; queue: Buffer[]; ended: boolean; wake?: () => void };
  const members: Member[] = [];
  let failure: unknown;
  let found = 0;
  const parser = new Parser({
    strict: true,
    onReadEntry: (entry) => {
      const type = entry.type as string;
      if (!(type === "File" || type === "OldFile" || type === "ContiguousFile") || !TRACE_NAME.test(entry.path) || /(^|\/)\._/.test(entry.path)) {
        entry.resume();
        return;
      }
      found++;
      const m: Member = { name: `${archive}:${entry.path}`, queue: [], ended: false };
      members.push(m);
      entry.on("data", (c: Buffer) => {
        m.queue.push(c);
        m.wake?.();
      });
      entry.on("end", () => {
        m.ended = true;
        m.wake?.();
      });
    },
  });
  parser.on("error", (e: unknown) => (failure ??= e));
  parser.on("warn", (code: string, message: unknown) => {
    if (code === "TAR_ENTRY_INVALID" || code === "TAR_BAD_ARCHIVE" || code === "TAR_ABORT") failure ??= new TraceError(archive, `bad tar archive: ${String((message as Error)?.message ?? message)}`);
  });
  // The archive is parsed member by member: the bytes of the member being visited are handed over as they come.
  const it = chunks[Symbol.asyncIterator]();
  let ended = false;
  const pump = async (): Promise<boolean> => {
    if (ended) return false;
    const r = await it.next();
    if (r.done) {
      parser.end();
      ended = true;
    } else parser.write(r.value);
    if (failure) throw failure instanceof TraceError ? failure : new TraceError(archive, `bad tar archive: ${(failure as Error).message}`);
    return true;
  };
  for (let k = 0; ; k++) {
    while (members.length <= k) if (!(await pump())) break;
    const m = members[k];
    if (!m) break;
    async function* body(): AsyncGenerator<Buffer> {
      for (;;) {
        while (m!.queue.length) {
          const c = m!.queue.shift()!;
          yield c;
        }
        if (m!.ended) return;
        if (!(await pump())) {
          if (!m!.ended) throw new TraceError(m!.name, "the archive ends inside this member (cut short?)");
        }
      }
    }
    await visit({ name: m.name, chakra: /\.et$/i.test(m.name.replace(/\.gz$/i, "")), chunks: body() });
    members[k] = { ...m, queue: [] };
  }
  if (found === 0) throw new TraceError(archive, "the archive holds no trace files (.json, .json.gz, .et)");
}
