import path from "node:path";
import winston from "winston";
import type { LogLevel } from "../config/run-config.js";

export interface LoggerOptions {
  rank: number;
  level: LogLevel;
  /** Every rank logs to the console at `level`, not just rank 0 (the others log errors only). */
  allRanks: boolean;
  /** Per-rank JSON lines file in this directory. */
  fileDir?: string;
}

/** Rank-labelled logs on stderr (stdout carries the result table), optionally per-rank JSON files. */
export function createLogger(o: LoggerOptions): winston.Logger {
  const transports: winston.transport[] = [
    new winston.transports.Console({
      stderrLevels: ["error", "warn", "info", "debug"],
      // A failure is often seen best from the rank it happened on, so every rank reports its errors.
      level: o.rank !== 0 && !o.allRanks ? "error" : undefined,
      format: winston.format.printf((info) => `[rank ${o.rank}] ${info.level}: ${String(info.message)}`),
    }),
  ];
  if (o.fileDir) {
    transports.push(
      new winston.transports.File({
        filename: path.join(o.fileDir, `rank${o.rank}.log.jsonl`),
        format: winston.format.combine(winston.format.timestamp(), winston.format.json()),
      }),
    );
  }
  return winston.createLogger({ level: o.level, defaultMeta: { rank: o.rank }, transports });
}

/** Ends the logger once what was logged has reached its transports: an exit right after would lose it. */
export function closeLogger(log: winston.Logger): Promise<void> {
  return new Promise((resolve) => {
    log.once("finish", () => resolve());
    log.end();
  });
}
