//===- PlanDialect.td - the plan dialect ----------------------*- tablegen -*-===//
//
// The `plan` dialect: the execution plan as per-rank instruction streams, one step ahead of the
// plan file.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_DIALECTS_PLAN_PLANDIALECT_TD
#define CONDUIT_DIALECTS_PLAN_PLANDIALECT_TD

include "mlir/IR/OpBase.td"

def Plan_Dialect : Dialect {
  let name = "plan";
  let cppNamespace = "::conduit::plan";
  let summary = "Static execution plans: per-rank instruction streams with streams and events";
  let description = [{
    A `plan.program` is what the runtime executes, written as IR. It holds the job
    configuration, the stage table (`plan.stage`: layer range, placement, parameters and
    micro-batch boundaries) and one `plan.rank` per pipeline rank. A rank's body is one linear
    instruction list; each instruction names the stream it runs on (by convention 0 = compute,
    1 = point-to-point, 2 = collectives). Instructions of one stream run in list order;
    instructions of different streams run concurrently, ordered only by events: `plan.signal`
    marks a point on its stream, `plan.wait` holds its stream until that point is reached.
    Received data lands in numbered buffer slots whose sizes the rank declares.

    Contract of this phase, checked by `conduit-verify-plan`: every (stage, micro-batch) has
    exactly one forward and one backward, in dependency order; every send has exactly one
    matching receive, in the same per-pair order on both sides; every collective is issued by
    all members of its group in the same order; compute on a stage happens only while its
    parameters are gathered; every event is signalled exactly once before the end and waited
    on only by other streams; and a simulation of the plan terminates.
  }];
  let usePropertiesForAttributes = 1;
  let dependentDialects = ["::conduit::pipe::PipeDialect"];
}

class Plan_Op<string mnemonic, list<Trait> traits = []> : Op<Plan_Dialect, mnemonic, traits>;

#endif // CONDUIT_DIALECTS_PLAN_PLANDIALECT_TD
