import { EnvError } from "./place.js";

/** Guards against "n[1-999999999]" eating the memory of every rank. */
const MAX_HOSTS = 1_000_000;

/** Splits on commas that are not inside brackets. */
function splitTopLevel(s: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < s.length; i++) {
    if (s[i] === "[") depth++;
    else if (s[i] === "]") depth--;
    else if (s[i] === "," && depth === 0) {
      parts.push(s.slice(start, i));
      start = i + 1;
    }
  }
  parts.push(s.slice(start));
  return parts;
}

/** "01-03,07" -> ["01", "02", "03", "07"]; the width of the low bound sets the zero padding. */
function expandRanges(list: string, hostlist: string): string[] {
  const out: string[] = [];
  for (const range of list.split(",")) {
    const match = /^(\d+)(?:-(\d+))?$/.exec(range);
    if (!match) throw new EnvError(`hostlist "${hostlist}" has a bad range "${range}"`);
    const [, low, high = low] = match;
    const [from, to] = [Number(low), Number(high)];
    if (from > to) throw new EnvError(`hostlist "${hostlist}" has a descending range "${range}"`);
    if (out.length + to - from >= MAX_HOSTS) throw new EnvError(`hostlist "${hostlist}" names more than ${MAX_HOSTS} hosts`);
    for (let n = from; n <= to; n++) out.push(String(n).padStart(low.length, "0"));
  }
  return out;
}

/** One host expression such as "rack[1-2]-n[01-02]": every bracket group multiplies the names. */
function expandHost(expr: string, hostlist: string): string[] {
  if (expr === "") throw new EnvError(`hostlist "${hostlist}" has an empty host name`);
  let names = [""];
  for (const [, literal, group] of expr.matchAll(/([^[\]]*)(?:\[([^[\]]*)\])?/gy)) {
    if (literal === "" && group === undefined) break;
    const suffixes = group === undefined ? [literal] : expandRanges(group, hostlist).map((n) => literal + n);
    if (names.length * suffixes.length > MAX_HOSTS) throw new EnvError(`hostlist "${hostlist}" names more than ${MAX_HOSTS} hosts`);
    names = names.flatMap((name) => suffixes.map((suffix) => name + suffix));
  }
  return names;
}

/** Expands a SLURM hostlist like `scontrol show hostnames`: "node[01-03,07],gpu5" -> node01 ... gpu5. */
export function expandHostlist(s: string): string[] {
  let depth = 0;
  for (const c of s) {
    depth += c === "[" ? 1 : c === "]" ? -1 : 0;
    if (depth < 0) throw new EnvError(`hostlist "${s}" has a "]" without "["`);
    if (depth > 1) throw new EnvError(`hostlist "${s}" has nested brackets`);
  }
  if (depth !== 0) throw new EnvError(`hostlist "${s}" has an unclosed "["`);
  return splitTopLevel(s).flatMap((expr) => expandHost(expr, s));
}

/** Expands SLURM_TASKS_PER_NODE: "2(x3),1" -> [2, 2, 2, 1]. */
export function expandTasksPerNode(s: string): number[] {
  const counts: number[] = [];
  for (const entry of s.split(",")) {
    const match = /^(\d+)(?:\(x(\d+)\))?$/.exec(entry);
    if (!match) throw new EnvError(`tasks-per-node list "${s}" is malformed at "${entry}" (expected a form like "2(x3),1")`);
    const repeat = Number(match[2] ?? 1);
    if (counts.length + repeat > MAX_HOSTS) throw new EnvError(`tasks-per-node list "${s}" names more than ${MAX_HOSTS} nodes`);
    for (let i = 0; i < repeat; i++) counts.push(Number(match[1]));
  }
  return counts;
}
