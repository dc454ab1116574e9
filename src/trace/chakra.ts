import type { ReadRank } from "./rank.js";
import { TraceError } from "./model.js";

export function readChakra(_bytes: Buffer, file: string, _hint: { fileRank?: number; world?: number }): ReadRank {
  throw new TraceError(file, "Chakra protobuf traces are not read yet");
}
