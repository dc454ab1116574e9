// The command line of a script in scripts/ or bench/, through node:util's parseArgs: --help prints the
// script's own header comment (its usage, kept where it is read in the source), and an unknown option, a
// missing value or a stray word is one line and exit 2, where parseArgs alone threw a stack trace
// (ERR_PARSE_ARGS_UNKNOWN_OPTION).
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

const ROOT = path.dirname(path.dirname(fileURLToPath(import.meta.url)));

/** The leading `//` comment of a file, without the slashes (a shebang line before it is skipped). */
function headerComment(file) {
  const lines = readFileSync(file, "utf8").split("\n");
  const start = lines[0].startsWith("#!") ? 1 : 0;
  const end = lines.findIndex((l, i) => i >= start && !l.startsWith("//"));
  return lines.slice(start, end < 0 ? lines.length : end).map((l) => l.replace(/^\/\/ ?/, "")).join("\n");
}

/**
 * parseArgs({ options, allowPositionals }) for the script at `url` (its import.meta.url), with --help (-h):
 * { values, positionals }, or the process ends (0 after the usage, 2 after one line naming the mistake).
 */
export function scriptArgs(url, options, { allowPositionals = false } = {}) {
  const file = fileURLToPath(url);
  const name = path.relative(ROOT, file);
  try {
    const parsed = parseArgs({ options: { ...options, help: { type: "boolean", short: "h" } }, allowPositionals });
    if (parsed.values.help) {
      process.stdout.write(`${headerComment(file)}\n`);
      process.exit(0);
    }
    return parsed;
  } catch (err) {
    if (!String(err.code).startsWith("ERR_PARSE_ARGS_")) throw err;
    // parseArgs' first sentence names the option; the rest explains "--" for positionals, which none here take.
    const what = err.message.split(/\.( |$)/)[0];
    const known = Object.keys(options).map((o) => `--${o}`).join(", ");
    process.stderr.write(`${name}: ${what} (options: ${known || "none"}; see --help)\n`);
    process.exit(2);
  }
}
