//===- PipeDialect.td - the pipe dialect ----------------------*- tablegen -*-===//
//
// The `pipe` dialect describes a training job at the levels the compiler walks through, from the
// model down to per-rank communication. Its description states the contract of each phase.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_DIALECTS_PIPE_PIPEDIALECT_TD
#define CONDUIT_DIALECTS_PIPE_PIPEDIALECT_TD

include "mlir/IR/OpBase.td"

def Pipe_Dialect : Dialect {
  let name = "pipe";
  let cppNamespace = "::conduit::pipe";
  let summary = "Pipeline- and data-parallel training jobs, from model to per-rank schedule";
  let description = [{
    A `pipe.model` op holds one training job. Its `phase` says how far compilation has gone, and
    each phase adds one kind of decision to the IR while keeping everything before it:

    * `model`: the layer chain (`pipe.layer`, in model order) with per-sample costs, plus the
      parallelism, cluster and training configuration as attributes. Nothing is decided yet.
    * `partitioned`: `pipe.stage` ops cut the layer chain into S = P*V contiguous, non-empty,
      covering layer ranges, numbered in model order.
    * `placed`: every stage names the pipeline rank that runs it.
    * `split`: every stage cuts the replica's batch into its own micro-batches, given as sample
      boundaries `[0, b1, ..., B]`. Stages may cut differently (UMPIPE).
    * `scheduled`: one `pipe.rank` per pipeline rank holds that rank's ordered compute list of
      `pipe.forward` / `pipe.backward` ops. Every (stage, micro-batch) has exactly one forward and
      one backward, on the rank the stage is placed on.
    * `communicating`: the rank bodies also hold point-to-point transfers (`pipe.send`,
      `pipe.recv`) and data-parallel collectives (`pipe.unshard`, `pipe.reshard`,
      `pipe.reduce_grad`, `pipe.gather_params`, `pipe.optimizer_step`).

    Ops of a later phase never appear in an earlier one; the model verifier checks that the IR
    matches its phase, and each pass states which phase it needs and which it produces. The
    `plan` dialect takes over after the `communicating` phase.
  }];
  let useDefaultAttributePrinterParser = 1;
  let extraClassDeclaration = [{
    void registerAttributes();
  }];
  let usePropertiesForAttributes = 1;
}

class Pipe_Op<string mnemonic, list<Trait> traits = []> : Op<Pipe_Dialect, mnemonic, traits>;

#endif // CONDUIT_DIALECTS_PIPE_PIPEDIALECT_TD
