// How a failure reaches the console: "runner (rank 3): cause", then what the error carries to help with it (a
// fault's ops in flight), indented. Said once, by whoever gets to it first: a rank says its fault before it
// closes its communicator (run/rank.ts), the command line whatever else ended the process (cli/index.ts).

const said = new WeakSet<object>();

/** Writes `err` to stderr unless it was said already; `rank` names the process where a launcher started it. */
export function sayFailure(err: unknown, rank: number | undefined): void {
  if (typeof err === "object" && err !== null) {
    if (said.has(err)) return;
    said.add(err);
  }
  const e = err as { message?: string; details?: string[] };
  const where = rank !== undefined ? `runner (rank ${rank})` : "runner";
  const lines = [(e.message ?? String(err)).split("\n")[0], ...(e.details ?? []).map((d) => `  ${d}`)];
  process.stderr.write(lines.map((l) => `${where}: ${l}\n`).join(""));
}
