import type { Stage } from "../config/job.js";
import { allGather } from "./all-gather.js";
import { allToAll } from "./all-to-all.js";
import { allToAllv } from "./all-to-allv.js";
import { allreduce } from "./allreduce.js";
import { barrier } from "./barrier.js";
import { broadcast } from "./broadcast.js";
import { compressedAllreduce } from "./compressed-allreduce.js";
import { compute } from "./compute.js";
import { gather, igather } from "./gather.js";
import { quantizedAllreduce } from "./quantized-allreduce.js";
import { reduceScatter } from "./reduce-scatter.js";
import { reduce } from "./reduce.js";
import { scatter } from "./scatter.js";
import { sendRecv } from "./send-recv.js";
import type { StageKind } from "./stage-kind.js";

const kinds: { [Op in Stage["op"]]: StageKind<Extract<Stage, { op: Op }>> } = {
  allreduce,
  reduce_scatter: reduceScatter,
  all_gather: allGather,
  gather,
  igather,
  broadcast,
  reduce,
  scatter,
  all_to_all: allToAll,
  all_to_allv: allToAllv,
  send_recv: sendRecv,
  barrier,
  compute,
  compressed_allreduce: compressedAllreduce,
  quantized_allreduce: quantizedAllreduce,
};

export function stageKind<S extends Stage>(stage: S): StageKind<S> {
  return kinds[stage.op] as unknown as StageKind<S>;
}

export type { PlanContext, StageKind } from "./stage-kind.js";
