// Trace files in, one RankTrace per file out: plain or gzipped JSON, a folder read as its files, the format
// told from the document's own keys.
import { readdirSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import { gunzipSync } from "node:zlib";
import { readExecutionTrace } from "./et.js";
import { readKineto } from "./kineto.js";
import type { RankTrace } from "./model.js";
import { TraceError } from "./model.js";
import { rankFromFileName } from "./names.js";

/** The files named, a folder standing for the .json and .json.gz files in it (sorted). */
export function traceFiles(paths: readonly string[]): string[] {
  return paths.flatMap((p) => {
    let dir = false;
    try {
      dir = statSync(p).isDirectory();
    } catch (error) {
      throw new TraceError(p, `cannot read: ${(error as NodeJS.ErrnoException).code === "ENOENT" ? "no such file or folder" : (error as Error).message}`);
    }
    if (!dir) return [p];
    const files = readdirSync(p).filter((f) => /\.json(\.gz)?$/.test(f)).sort().map((f) => path.join(p, f));
    if (files.length === 0) throw new TraceError(p, "the folder holds no .json or .json.gz files");
    return files;
  });
}

function text(file: string): string {
  const bytes = readFileSync(file);
  if (bytes[0] !== 0x1f || bytes[1] !== 0x8b) return bytes.toString("utf8");
  try {
    return gunzipSync(bytes).toString("utf8");
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    throw new TraceError(file, code === "Z_BUF_ERROR" ? "truncated gzip (the file ends before its compressed data does)" : `bad gzip data: ${(error as Error).message}`);
  }
}

function parse(file: string): unknown {
  const body = text(file);
  try {
    return JSON.parse(body);
  } catch (error) {
    throw new TraceError(file, `not JSON: ${(error as Error).message}`);
  }
}

/** One trace file, read into its rank's collectives. */
export function readTrace(file: string): RankTrace {
  const doc = parse(file);
  if (doc === null || typeof doc !== "object" || Array.isArray(doc)) throw new TraceError(file, "not a trace: expected a JSON object");
  const d = doc as Record<string, unknown>;
  const hint = { fileRank: rankFromFileName(file) };
  if ("nodes" in d || ("schema" in d && !("traceEvents" in d))) return readExecutionTrace(d, file, hint);
  if (Array.isArray(d.traceEvents)) return readKineto(d, file, hint);
  throw new TraceError(file, 'not a trace this importer knows: expected a PyTorch Execution Trace ("schema", "nodes") or a Kineto trace ("traceEvents")');
}
