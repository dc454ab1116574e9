// What Linux's /proc says about processes: who is alive, whose child a process is, what it runs with,
// and its CPU time. Fault and oversubscription tests read ranks from the outside with these, so nothing
// in the runner needs a test hook.
import { readdirSync, readFileSync } from "node:fs";

const TICKS_PER_SEC = 100; // USER_HZ: what /proc/<pid>/stat counts in on every Linux ABI

export function alive(pid) {
  try {
    process.kill(pid, 0);
    // A zombie still answers kill(0) until its parent reaps it; it runs nothing any more.
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, "utf8"));
  } catch {
    return false;
  }
}

/** Resolves with the pids still alive once all have exited or `withinMs` passed: a dying process takes a moment. */
export async function survivors(pids, withinMs = 5000) {
  const until = Date.now() + withinMs;
  while (pids.some(alive) && Date.now() < until) await new Promise((r) => setTimeout(r, 50));
  return pids.filter(alive);
}

function statFields(pid) {
  const text = readFileSync(`/proc/${pid}/stat`, "utf8");
  // The command name may hold spaces and parentheses: fields start after the last ")".
  return text.slice(text.lastIndexOf(")") + 2).split(" ");
}

/** Every live process whose parent is `pid`. */
export function childrenOf(pid) {
  const out = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      if (Number(statFields(name)[1]) === pid) out.push(Number(name));
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

/** The value of `name` in the environment process `pid` started with (undefined when unreadable). */
export function envOf(pid, name) {
  try {
    const vars = readFileSync(`/proc/${pid}/environ`, "utf8").split("\0");
    return vars.find((v) => v.startsWith(`${name}=`))?.slice(name.length + 1);
  } catch {
    return undefined;
  }
}

/** Pids of live processes whose command line contains `text` and whose environment has name=value. */
export function findProcesses(text, name, value) {
  const out = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (!readFileSync(`/proc/${entry}/cmdline`, "utf8").includes(text)) continue;
    } catch {
      continue;
    }
    if (envOf(Number(entry), name) === value) out.push(Number(entry));
  }
  return out;
}

/** User + system CPU seconds the process has used. */
export function cpuSeconds(pid) {
  const f = statFields(pid);
  return (Number(f[11]) + Number(f[12])) / TICKS_PER_SEC; // utime, stime
}
