//===- Passes.td - Conduit's passes ---------------------------*- tablegen -*-===//
//
// Every pass of the compiler, in pipeline order. Each works on the pipe.model ops of a module,
// states the phase it needs and the phase it leaves, and reports a problem as a diagnostic on
// the offending op.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_PASSES_PASSES_TD
#define CONDUIT_PASSES_PASSES_TD

include "mlir/Pass/PassBase.td"

def ConduitPartitionStages : Pass<"conduit-partition-stages", "::mlir::ModuleOp"> {
  let summary = "Cut the layer chain into S = P*V stages";
  let description = [{
    Needs phase `model`; leaves phase `partitioned`. Adds one `pipe.stage` per stage, each a
    contiguous, non-empty layer range, chosen to minimise the time of the slowest stage
    (forward plus backward of one micro-batch from the cost model, embedding and head
    included; the recomputed forward counts when activations are checkpointed). The search is
    exact. A `stage_layers` attribute on the model (from the job file's
    `parallelism.stage_layers`) fixes the layout instead.

    Before:
    ```mlir
    pipe.model @m phase model attributes {parallelism = #pipe.parallelism<pipeline = 2, ...>, ...} {
      pipe.layer "embedding" embedding ...
      pipe.layer "block.0" block ...
      pipe.layer "block.1" block ...
      pipe.layer "head" head ...
    }
    ```
    After:
    ```mlir
    pipe.model @m phase partitioned ... {
      ...
      pipe.stage 0 layers [0, 2)
      pipe.stage 1 layers [2, 4)
    }
    ```
    Errors: more stages than layers; a `stage_layers` layout of the wrong length or sum.
  }];
  let dependentDialects = ["::conduit::pipe::PipeDialect"];
}

def ConduitPlaceStages : Pass<"conduit-place-stages", "::mlir::ModuleOp"> {
  let summary = "Assign every stage to a pipeline rank";
  let description = [{
    Needs phase `partitioned`; leaves phase `placed`. `placement=loop` (default) puts stage s
    on rank s mod P, so rank r holds stages r, r+P, r+2P, ...; `placement=v` puts stages r and
    2P-1-r on rank r (two stages per rank, the zero-bubble V shape).

    ```mlir
    pipe.stage 0 layers [0, 2) rank 0
    pipe.stage 1 layers [2, 3) rank 1
    pipe.stage 2 layers [3, 5) rank 0
    ```
    Errors: `placement=v` with stages_per_device other than 2.
  }];
  let options = [
    Option<"placement", "placement", "std::string", "\"loop\"",
           "Stage placement: 'loop' (stage s on rank s mod P) or 'v' (rank r holds r and 2P-1-r)">
  ];
  let dependentDialects = ["::conduit::pipe::PipeDialect"];
}

def ConduitSplitMicrobatches : Pass<"conduit-split-microbatches", "::mlir::ModuleOp"> {
  let summary = "Cut the replica's batch into each stage's micro-batches";
  let description = [{
    Needs phase `placed`; leaves phase `split`. Each stage gets sample boundaries
    `[0, b1, ..., B]`, B = microbatches x microbatch_size: M equal micro-batches by default, or
    the stage's own sizes from the model's `microbatch_partitions` attribute (UMPIPE: stages
    may cut differently; a micro-batch then depends on every overlapping micro-batch of its
    neighbour stages). With `microbatch_partitions = "auto"` the split is equal and
    `conduit-optimize-microbatches` searches the partitions afterwards.

    ```mlir
    pipe.stage 0 layers [0, 2) rank 0 samples [0, 2, 4, 8]
    pipe.stage 1 layers [2, 4) rank 1 samples [0, 4, 8]
    ```
    Errors: partitions for the wrong number of stages or not adding up to the batch.
  }];
  let dependentDialects = ["::conduit::pipe::PipeDialect"];
}

def ConduitSchedule : Pass<"conduit-schedule", "::mlir::ModuleOp"> {
  let summary = "Order every rank's forwards and backwards";
  let description = [{
    Needs phase `split`; leaves phase `scheduled`. Adds one `pipe.rank` per pipeline rank with
    its ordered `pipe.forward` / `pipe.backward` ops. `kind` selects the schedule (default: the
    model's `parallelism.schedule`), `group-size` the depth-first group (default: the model's):

    * `gpipe`: all forwards, then all backwards (one stage per rank);
    * `1f1b`: min(P-r-1, M) warm-up forwards, then one forward and one backward (one stage per
      rank);
    * `depth-first`: Megatron-LM's interleaved 1F1B with group size N (P <= N <= M);
    * `breadth-first`: all micro-batches through each local stage, then the backwards in
      reverse; any M (with a warning when M < P: every loop wrap stalls).

    The result is verified before it is written: every (stage, micro-batch) has one forward
    and one backward on its rank, and the ranks can execute their lists without deadlock.

    ```mlir
    pipe.rank 0 {
      pipe.forward stage 0 mb 0
      pipe.forward stage 0 mb 1
      pipe.backward stage 0 mb 0
      pipe.backward stage 0 mb 1
    }
    ```
    Errors say what would work: 1f1b or gpipe with several stages per rank, depth-first with
    M < P, a group size outside [P, M] or a last group smaller than P, depth-first with
    unequal micro-batch counts.
  }];
  let options = [
    Option<"kind", "kind", "std::string", "\"\"",
           "Schedule: gpipe, 1f1b, depth-first or breadth-first (default: the model's)">,
    Option<"groupSize", "group-size", "int64_t", "0",
           "Depth-first group size N (default: the model's)">
  ];
  let dependentDialects = ["::conduit::pipe::PipeDialect"];
}

#endif // CONDUIT_PASSES_PASSES_TD
