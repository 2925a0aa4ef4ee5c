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
    exact. Multi-token prediction modules stay on the last stage with the head, whose tables
    they share: the search cuts the chain with them and the head as one layer, and an explicit
    layout must leave them together. A `stage_layers` attribute on the model (from the job
    file's `parallelism.stage_layers`) fixes the layout instead.

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
    Needs phase `partitioned`; leaves phase `placed`. The placement is the job's
    (`parallelism.placement`) unless the option names one. `loop` puts stage s on rank s mod P,
    so rank r holds stages r, r+P, r+2P, ...; `v` puts stages r and 2P-1-r on rank r (two
    stages per rank, the zero-bubble V shape), and is recorded in the parallelism attribute.

    ```mlir
    pipe.stage 0 layers [0, 2) rank 0
    pipe.stage 1 layers [2, 3) rank 1
    pipe.stage 2 layers [3, 5) rank 0
    ```
    Errors: `placement=v` with stages_per_device other than 2.
  }];
  let options = [
    Option<"placement", "placement", "std::string", "\"\"",
           "Stage placement: 'loop' (stage s on rank s mod P) or 'v' (rank r holds r and "
           "2P-1-r); empty: the job's">
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

def ConduitOptimizeMicrobatches : Pass<"conduit-optimize-microbatches", "::mlir::ModuleOp"> {
  let summary = "Search per-stage micro-batch sizes (UMPIPE) when the job asks for them";
  let description = [{
    Needs phase `split`; keeps it. Acts only on a model whose `microbatch_partitions` is
    `"auto"`: it searches every stage's own cut of the batch for the shortest predicted step,
    rewrites the stages' sample boundaries and records the sizes in `microbatch_partitions`.
    The prediction builds what the rest of the pipeline would (schedule, transfers and their
    order, receive slots, collectives, optimizer steps) and runs it with the plan simulator's
    semantics, so it equals the compiled plan's simulated step time.

    Methods (`method`): `greedy` moves one sample between neighbouring micro-batches while it
    helps; `dp` picks, stage by stage, the best cut from a family (equal cuts of every count,
    ramps up and down); `genetic` is a dual-chromosome genetic algorithm (micro-batch counts and
    relative sizes as separate chromosomes); `descent` (the default) starts from the best
    common equal cut and the `dp` result and takes, stage by stage, the best single move (a
    sample between neighbours, a split, a merge, a cut of the family) until none helps.
    `best` names the method that does best on the committed cases (now `descent`).

    ```mlir
    // before, with microbatch_partitions = "auto"
    pipe.stage 0 layers [0, 2) rank 0 samples [0, 2, 4, 6, 8]
    // after
    pipe.stage 0 layers [0, 2) rank 0 samples [0, 1, 2, 4, 8]
    ```
    Errors: a job with several stages per rank or a schedule other than `gpipe` and `1f1b`.
  }];
  let options = [
    Option<"method", "method", "std::string", "\"descent\"",
           "greedy, dp, genetic, descent or best">,
    Option<"seed", "seed", "uint64_t", "1", "Seed of the genetic algorithm">,
    Option<"timeBudget", "time-budget", "double", "0",
           "Seconds after which the search returns its best so far (0: no limit)">,
    Option<"maxMicrobatches", "max-microbatches", "int64_t", "0",
           "Most micro-batches per stage (0: twice the job's count, at most one per sample)">
  ];
  let statistics = [
    Statistic<"numCandidates", "candidates", "Partitions evaluated">
  ];
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

    For a mixture of experts with E > 1, the interleaved order (depth-first) pairs each
    steady-state forward with the backward of another micro-batch that follows it, as
    Megatron-Core's "combined 1F1B" does, so that the expert all-to-alls of each hide behind
    the other's compute (`pipe.forward ... paired`); a forward whose pair would wait on its
    own output (sent at the pair's end) stays unpaired. DualPipeV pairs by itself, and there
    defers no weight gradient before a rank's last forward, as DeepSeek's DualPipe does: its
    pairs carry whole backwards, whose all-to-alls the forward hides, where deferring Ws
    would leave them to unpaired input gradients. Where every stage cuts the batch alike
    into M >= 2P micro-batches, its order is then DualPipe's own eight steps, a fixed pattern
    that does not depend on the predicted times (the order PyTorch's ScheduleDualPipeV
    writes). Plain 1F1B stays unpaired: a pair sends
    when both halves are done, and the next rank waits for each forward's output.
    `overlap-all-to-alls=false` keeps the interleaved order unpaired and DualPipeV deferring
    throughout, as for a dense model.
  }];
  let options = [
    Option<"kind", "kind", "std::string", "\"\"",
           "Schedule: gpipe, 1f1b, depth-first or breadth-first (default: the model's)">,
    Option<"groupSize", "group-size", "int64_t", "0",
           "Depth-first group size N (default: the model's)">,
    Option<"overlapAllToAlls", "overlap-all-to-alls", "bool", /*default=*/"true",
           "Order a mixture of experts with E > 1 for the all-to-alls' overlap: the "
           "interleaved order paired, DualPipeV in DualPipe's own order (backwards whole "
           "until a rank's last forward)">
  ];
  let dependentDialects = ["::conduit::pipe::PipeDialect"];
}

def ConduitImportSchedule : Pass<"conduit-import-schedule", "::mlir::ModuleOp"> {
  let summary = "Take placement and per-rank order from a PyTorch compute-only CSV";
  let description = [{
    Needs phase `partitioned`; leaves phase `scheduled`, replacing placement, the micro-batch
    split (equal) and the schedule. The file holds one row per rank of comma-separated compute
    actions in torch.distributed.pipelining's notation (`0F3`: forward of stage 0, micro-batch
    3; `1B2`: backward; empty cells are idle steps). Each stage's rank is the row it appears
    in. The schedule is verified like a built-in one (completeness, order, no deadlock).

    Errors name the row and column of a bad cell, a stage on two rows, missing or repeated
    actions, or a row or micro-batch count that does not match the job.
  }];
  let options = [
    Option<"file", "file", "std::string", "\"\"", "The compute-only CSV">
  ];
  let dependentDialects = ["::conduit::pipe::PipeDialect"];
}

def ConduitInsertP2P : Pass<"conduit-insert-p2p", "::mlir::ModuleOp"> {
  let summary = "Add the sends and receives of every cross-rank dependency";
  let description = [{
    Needs phase `scheduled`; leaves phase `communicating`. For every stage boundary between
    two ranks: an activation transfer from each forward to every overlapping micro-batch of
    the next stage, and a gradient transfer from each backward to every overlapping
    micro-batch of the previous stage, with byte counts from the layers. Stages on one rank
    exchange nothing.

    Order: every transfer is keyed by when its data is produced in the compute-only timeline
    (then by the producer's position in a dependency order, then by its consumer), and both
    sides sit at that key in their rank's list. All ranks therefore see their transfers in one
    global order that respects every dependency, which makes the plan deadlock-free under NCCL
    semantics for any actual timing. Receives are posted when their data is produced, not at
    the start of the step. A send and a receive two neighbours exchange at nearly the same
    moment, with no dependency between them, form one `batch` on both sides.

    ```mlir
    pipe.forward stage 0 mb 1
    pipe.send activation stage 0 mb 1 to 1 stage 1 mb 1 samples [1, 2) bytes 8192 batch 0
    pipe.recv gradient stage 0 mb 0 from 1 stage 1 mb 0 samples [0, 1) bytes 8192 batch 0
    pipe.backward stage 0 mb 0
    ```
  }];
  let statistics = [
    Statistic<"numTransfers", "transfers", "Point-to-point transfers inserted">
  ];
  let dependentDialects = ["::conduit::pipe::PipeDialect"];
}

def ConduitPlaceCollectives : Pass<"conduit-place-collectives", "::mlir::ModuleOp"> {
  let summary = "Place the data-parallel collectives and the optimizer steps";
  let description = [{
    Needs phase `communicating` (after `conduit-insert-p2p`). Per sharding mode, with D > 1:

    * `full` (ZeRO-3 / FSDP): a `pipe.unshard` (all-gather) before a stage's compute and a
      `pipe.reshard` after it. At most `fsdp_window` stages are resident; when a stage must be
      gathered and the window is full, the resident stage used furthest in the future is
      resharded right after its last use and the all-gather is issued right then, as early as
      the window allows (Belady's rule: the fewest all-gathers for the window). With
      breadth-first and a window of 2 that is 2V-2 all-gathers per rank per step, for any M.
    * `full`, `gradients`, `optimizer`: a `pipe.reduce_grad ... reduce_scatter` right after the
      stage's last backward (V per rank per step); `none`: an `all_reduce` there. With
      `gradient_reduction = "run"` (`full`, `gradients`), one right after the last backward or
      weight gradient of each run of the rank's backwards on the stage (forwards of other
      stages aside) instead, each added into
      the shard, so that no stage's whole gradients wait across another stage's compute; the
      stages holding tied embeddings keep one.
    * `gradients`, `optimizer`: a `pipe.gather_params` per stage before the rank's first
      compute, in the order of the stages' first computes (all-gather of the shards the
      previous step's optimizer updated), so that each overlaps the computes before its
      stage's first.

    Every stage gets one `pipe.optimizer_step` at the end of its rank's compute, in the order
    its reductions finish. With D = 1 there are no collectives, only the optimizer steps.

    With tied embeddings, or multi-token prediction modules (whose stage, the last, keeps a
    copy of the token table), any D, a rank that holds the first or the last stage ends its
    compute with a `pipe.tie_grads` that adds the other copy's gradient (exchanged with the
    rank of the other stage, or in place when it holds both); the reductions of those stages
    follow it.

    ```mlir
    pipe.unshard stage 0 bytes 400
    pipe.unshard stage 2 bytes 400
    pipe.forward stage 0 mb 0
    ...
    pipe.backward stage 2 mb 0
    pipe.reduce_grad stage 2 bytes 800 reduce_scatter
    ...
    pipe.optimizer_step stage 2
    ```
  }];
  let statistics = [
    Statistic<"numAllGathers", "all-gathers", "All-gathers placed (all ranks)">,
    Statistic<"numReductions", "reductions", "Gradient reductions placed (all ranks)">,
    Statistic<"numTies", "ties", "Tied-gradient sums placed (all ranks)">
  ];
  let dependentDialects = ["::conduit::pipe::PipeDialect"];
}

def ConduitPlanMemory : Pass<"conduit-plan-memory", "::mlir::ModuleOp"> {
  let summary = "Compute every rank's peak memory and refuse plans that do not fit";
  let description = [{
    Needs phase `communicating` with collectives placed. Walks each rank's program and tracks
    parameters (shards, replicated copies, gathered FSDP buffers), gradients (fp32 shards and
    accumulation buffers, freed as their reduce-scatter completes, beside the rank's next
    backward or weight gradient), optimizer state (Adam: fp32 moments
    and master copy), activations stored between forward and backward (with full
    checkpointing each layer's input, and one layer's recomputed activations at a time while
    a forward or backward runs), the rank's receive slots (as `conduit-lower-to-plan` assigns them, held all step) and outputs
    from the compute that writes them until the compute after their last send (the transfer
    runs beside it). Records the peak as `peak_memory` on each `pipe.rank`.

    A peak above the device's memory is an error listing the largest contributors at that
    moment and the changes that would fit (activation checkpointing, a smaller micro-batch),
    evaluated on the same plan.

    ```mlir
    pipe.rank 0 attributes {peak_memory = 1523712 : i64} {
    ```
  }];
  let statistics = [
    Statistic<"peakBytes", "peak-bytes", "Largest peak memory of any rank">
  ];
  let dependentDialects = ["::conduit::pipe::PipeDialect"];
}

def ConduitLowerToPlan : Pass<"conduit-lower-to-plan", "::mlir::ModuleOp"> {
  let summary = "Lower a communicating pipe.model to a plan.program";
  let description = [{
    Needs phase `communicating` with collectives placed; replaces the `pipe.model` by a
    `plan.program` holding its layers, stage table, one collective group per rank (its
    data-parallel replicas) and one `plan.rank` per pipeline rank.

    Each rank's body becomes one instruction list on three streams: 0 compute (forward,
    backward, free, optimizer step), 1 point-to-point, 2 collectives. Dependencies between
    streams become `plan.signal` / `plan.wait` pairs: a send after its producer, a compute
    after the last receive of its input and after its stage's all-gather, a receive into a
    reused slot after the slot's previous consumer, an all-gather after the reshard that frees
    its place, a reduction after the stage's last backward, an optimizer step after its
    reduction, a parameter all-gather after its optimizer step. Dependencies already implied
    by an earlier wait of the same stream get no event.

    Received data lands in slots: one per consumer (all the pieces of its input), live from
    its first receive to the consumer, reused once free.

    After each compute come the collectives it issues from inside its layers
    (runtime/plan/TensorCollectives.h): the tensor group's and, in mixture-of-experts blocks
    with expert parallelism, the dispatch and combine all-to-alls. In a paired step (a
    `paired` forward and the backward after it, DualPipe's overlapped chunks) each all-to-all
    names the other half's compute as the one it hides behind (`behind stage mb`), unless
    `overlap-all-to-alls` is off.

    The lowering produces each rank's instructions as the plan file's data and builds their
    ops from it. A compile that only writes the plan or reports on it (`conduit-compile`
    without `--emit=mlir`, `conduit-tune`) skips the ops: the `plan.rank` ops stay empty and
    the instructions go to `conduit-verify-plan` as data, which on a plan of a million
    instructions saves as many operations (docs/performance.md).

    ```mlir
    plan.rank 1 events 2 slots [16384] {
      plan.recv activation stage 1 mb 0 from 0 stage 0 mb 0 samples [0, 2) bytes 16384 slot 0 on 1
      plan.signal event 0 on 1
      plan.wait event 0 on 0
      plan.forward stage 1 mb 0 slot 0 on 0
      ...
    ```
  }];
  let options = [
    Option<"overlapAllToAlls", "overlap-all-to-alls", "bool", /*default=*/"true",
           "Let the expert all-to-alls of a paired step hide behind the other half's compute">,
  ];
  let dependentDialects = ["::conduit::plan::PlanDialect"];
}

def ConduitVerifyPlan : Pass<"conduit-verify-plan", "::mlir::ModuleOp"> {
  let summary = "Prove a plan deadlock-free and dependency-complete";
  let description = [{
    Checks every `plan.program`: first the rules a runtime relies on when it reads a plan file
    (references resolve, ranges agree, the k-th send of every (sender, receiver) pair matches
    the k-th receive), then a simulation of all ranks with NCCL semantics (streams in order,
    events, rendezvous transfers matched per pair in FIFO order, batches posted together,
    collectives once every group member arrived) that checks:

    * every (stage, micro-batch) has exactly one forward and one backward, each ordered (by
      stream order and events, not by timing) after its inputs: the received pieces covering
      its samples, or the same-rank producer;
    * no receive overwrites a slot before its previous content was read;
    * compute on a stage only while its parameters are gathered (full sharding), at most
      `fsdp_window` stages gathered at once, none left gathered at the end;
    * every collective is issued by all members of its group in the same order;
    * gradients reduced once per stage after its last backward (with `gradient_reduction =
      "run"`, each reduction after the backwards it covers, no backward or weight gradient
      writing the gradients while a reduction reads them, and none left unreduced), one
      optimizer step after that; with optimizer and gradient sharding each stage's parameters
      gathered once, before its first compute (the previous step's update) or after its
      optimizer step, and every compute after that gather;
    * the simulation terminates; otherwise every blocked stream is named with its
      instruction and what it waits for.

    A failure is reported on the offending instruction.

    The simulated step it proves is the one the reports describe. Without `simulated-times`
    (a compile that only writes the plan file), the simulation proves the same and computes
    the same step time but keeps no time per instruction.
  }];
  let options = [
    Option<"simulatedTimes", "simulated-times", "bool", /*default=*/"true",
           "Keep every instruction's simulated times (what reports, traces and charts read)">,
  ];
  let dependentDialects = ["::conduit::plan::PlanDialect"];
}

#endif // CONDUIT_PASSES_PASSES_TD
