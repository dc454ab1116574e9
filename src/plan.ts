// What a job becomes for one sweep point: the native program every rank runs, and per stage what the
// metrics need to turn its timings into rows. graph/plan.ts makes it; graph/execute.ts runs it and
// metrics/ reads it, so it lives apart from both.
import type { NativeProgram } from "./comm/native.js";
import type { DType, Stage } from "./config/job.js";
import type { StageKind } from "./stages/index.js";

/** A value a parameter sweep sets on a stage option. */
export type ParamValue = string | number | boolean;

export interface PlannedStage {
  readonly stage: Stage;
  readonly kind: StageKind;
  /** Elements of the whole array the bandwidth refers to. */
  readonly count: number;
  /** The dtype of the stage's tensors, or null for barrier/compute. */
  readonly dtype: DType | null;
  /** Options a parameter sweep set on this stage at this point. */
  readonly params?: Record<string, ParamValue>;
  /** The stage estimates its result at this point (it has not fallen back to the exact collective). */
  readonly estimates: boolean;
  /** Stages that can fall back to the exact collective: why they do at this point, or null. */
  readonly fallback?: string | null;
  /** Its stream and that stream's lane (DESIGN.md, "Graphs, streams and groups"). */
  readonly stream: string;
  readonly lane: number;
  /** Ranks per group: the world's size unless the stage runs in a group. */
  readonly groupSize: number;
  /** In a group: its name and how many groups ran the stage at once. */
  readonly group?: { name: string; count: number };
  /** An imported trace's own time for this stage's collective (the job's source.trace_us). */
  readonly traceUs?: number;
}

/** How many ranks there are, and which host each runs on (Topology.hostOf: hosts numbered by their lowest rank). */
export interface World {
  size: number;
  hostOf: readonly number[];
}

export interface Plan {
  readonly program: NativeProgram;
  readonly stages: readonly PlannedStage[];
}
