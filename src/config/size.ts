import * as z from "zod";
import { describeValue, FORMS } from "./errors.js";

const EXPECTED = 'expected a size like 4096, "4Ki", "16Mi" or "1Gi"';
/** Largest accepted size; keeps counts far inside the safe-integer range even after multiplying by a dtype width. */
const MAX_SIZE = 2 ** 40;

const MULTIPLIERS: Record<string, bigint> = {
  "": 1n,
  k: 1000n,
  K: 1000n,
  M: 1000n ** 2n,
  G: 1000n ** 3n,
  T: 1000n ** 4n,
  Ki: 1024n,
  Mi: 1024n ** 2n,
  Gi: 1024n ** 3n,
  Ti: 1024n ** 4n,
};
const SIZE_STRING = /^(\d+)(?:\.(\d+))?(Ki|Mi|Gi|Ti|k|K|M|G|T)?$/;

function checkRange(value: number, written: number | string): number {
  if (value > MAX_SIZE) throw new RangeError(`expected a size of at most 1Ti, got ${describeValue(written)}`);
  return value;
}

/**
 * Reads a count written as a number or with a decimal (k, M, G, T) or binary (Ki, Mi, Gi, Ti)
 * suffix. Fractions are allowed only when the result is whole ("1.5Ki"), and the arithmetic is
 * exact so that "1.005k" is 1005 and not a rounding accident. Throws RangeError on bad input.
 */
export function parseSize(v: number | string): number {
  if (typeof v === "number") {
    if (!Number.isInteger(v) || v < 0) throw new RangeError(`${EXPECTED}, got ${describeValue(v)}`);
    return checkRange(v, v);
  }
  const match = SIZE_STRING.exec(v);
  if (!match) throw new RangeError(`${EXPECTED}, got ${describeValue(v)}`);
  const [, whole, fraction = "", suffix = ""] = match;
  const scaled = BigInt(whole + fraction) * MULTIPLIERS[suffix];
  const divisor = 10n ** BigInt(fraction.length);
  if (scaled % divisor !== 0n) throw new RangeError(`expected a whole number, ${describeValue(v)} is not`);
  return checkRange(Number(scaled / divisor), v);
}

function sizeIssue(issue: { input?: unknown }): string {
  return issue.input === undefined ? `missing, ${EXPECTED}` : `${EXPECTED}, got ${describeValue(issue.input)}`;
}

/** How a size may be written, for the descriptions of fields that hold one. */
export const SIZE_FORMS = 'an integer, or a string like "4Ki", "16Mi", "1Gi" (binary) or "1k", "1M" (decimal)';

/** A size field: validated while parsing, a plain number afterwards. The branch checks also describe it in the JSON Schema. */
export const sizeSchema = z
  .union([z.int({ error: sizeIssue }).min(0, { error: sizeIssue }), z.string().regex(SIZE_STRING, { error: sizeIssue })], {
    error: sizeIssue,
  })
  .meta({ description: `A count: ${SIZE_FORMS}` })
  .register(FORMS, { form: "size" })
  .transform((value, ctx) => {
    try {
      return parseSize(value);
    } catch (error) {
      if (!(error instanceof RangeError)) throw error;
      ctx.issues.push({ code: "custom", message: error.message, input: value });
      return z.NEVER;
    }
  });

const UNITS = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];

/** Bytes for humans: "24 B", "4 KiB", "1.5 MiB". */
export function formatSize(bytes: number): string {
  let unit = 0;
  let value = bytes;
  while (value >= 1024 && unit < UNITS.length - 1) {
    value /= 1024;
    unit++;
  }
  return `${Number(value.toFixed(2))} ${UNITS[unit]}`;
}
