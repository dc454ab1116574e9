import { LOG_LEVELS, type LogLevel } from "../config/run-config.js";

type Winston = typeof import("winston");

export interface LoggerOptions {
  rank: number;
  level: LogLevel;
  /** Every rank logs to the console at `level`, not just rank 0 (the others log errors only). */
  allRanks: boolean;
}

/** What a run logs through: rank-labelled lines on stderr (stdout carries the result table). */
export interface Logger {
  error(message: string): void;
  warn(message: string): void;
  info(message: string): void;
  debug(message: string): void;
  isDebugEnabled(): boolean;
  /** Also logs every line at the logger's level to `file`, as JSON lines. */
  addFile(file: string): Promise<void>;
  /** Resolves once what was logged has reached its transports: an exit right after would lose it. */
  close(): Promise<void>;
}

/**
 * winston, loaded by the first line some transport takes. A rank other than 0 logs errors only, so in a run
 * that goes well it never loads winston, some 40 ms of CPU at every rank's start. Lines logged while winston
 * loads wait, in order; after that they go straight to winston.
 */
class LazyLogger implements Logger {
  #waiting: [LogLevel, string][] = [];
  #loading?: Promise<void>;
  #winston?: Winston;
  #logger?: import("winston").Logger;
  #toFile = false;

  constructor(private readonly o: LoggerOptions) {}

  error(message: string) { this.#log("error", message); }
  warn(message: string) { this.#log("warn", message); }
  info(message: string) { this.#log("info", message); }
  debug(message: string) { this.#log("debug", message); }
  isDebugEnabled() { return this.#takes("debug"); }

  async addFile(file: string) {
    this.#toFile = true;
    await this.#load();
    const { transports, format } = this.#winston!;
    this.#logger!.add(new transports.File({ filename: file, format: format.json() }));
  }

  async close() {
    if (!this.#loading) return;
    await this.#loading;
    await new Promise<void>((resolve) => {
      this.#logger!.once("finish", () => resolve());
      this.#logger!.end();
    });
  }

  /** The console takes the logger's level on rank 0 (every rank with allRanks), errors elsewhere; a log file, the logger's level. */
  #takes(level: LogLevel): boolean {
    const within = (limit: LogLevel) => LOG_LEVELS.indexOf(level) <= LOG_LEVELS.indexOf(limit);
    return within(this.#toFile || this.o.rank === 0 || this.o.allRanks ? this.o.level : "error");
  }

  #log(level: LogLevel, message: string) {
    if (!this.#takes(level)) return;
    if (this.#logger) {
      this.#logger.log(level, message);
    } else {
      this.#waiting.push([level, message]);
      void this.#load();
    }
  }

  #load(): Promise<void> {
    this.#loading ??= import("winston").then((w) => {
      this.#winston = w.default;
      this.#logger = consoleLogger(w.default, this.o);
      for (const [level, message] of this.#waiting.splice(0)) this.#logger.log(level, message);
    });
    return this.#loading;
  }
}

function consoleLogger(winston: Winston, o: LoggerOptions): import("winston").Logger {
  const toConsole = new winston.transports.Console({
    stderrLevels: [...LOG_LEVELS],
    // A failure is often seen best from the rank it happened on, so every rank reports its errors.
    level: o.rank !== 0 && !o.allRanks ? "error" : undefined,
    format: winston.format.printf((info) => `[rank ${o.rank}] ${info.level}: ${String(info.message)}`),
  });
  return winston.createLogger({ level: o.level, defaultMeta: { rank: o.rank }, transports: [toConsole] });
}

export function createLogger(o: LoggerOptions): Logger {
  return new LazyLogger(o);
}
