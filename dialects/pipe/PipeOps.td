//===- PipeOps.td - pipe operations ---------------------------*- tablegen -*-===//
//
// Operations of the pipe dialect, grouped by the phase that introduces them: the model level
// (model, layer), the partitioned level (stage), the scheduled level (rank, forward, backward)
// and the communication level (send, recv and the data-parallel collectives).
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_DIALECTS_PIPE_PIPEOPS_TD
#define CONDUIT_DIALECTS_PIPE_PIPEOPS_TD

include "dialects/pipe/PipeDialect.td"
include "dialects/pipe/PipeAttrs.td"
include "mlir/IR/BuiltinAttributes.td"
include "mlir/IR/CommonAttrConstraints.td"
include "mlir/IR/OpBase.td"
include "mlir/IR/Properties.td"
include "mlir/IR/SymbolInterfaces.td"

//===----------------------------------------------------------------------===//
// Model level
//===----------------------------------------------------------------------===//

def Pipe_ModelOp : Pipe_Op<"model", [
    Symbol, IsolatedFromAbove, NoTerminator, SingleBlock, NoRegionArguments]> {
  let summary = "a training job: layers, configuration, and the decisions made so far";
  let description = [{
    The root of a job. Its body holds, in this order, the `pipe.layer` chain, then (from the
    `partitioned` phase on) the `pipe.stage` ops, then (from the `scheduled` phase on) one
    `pipe.rank` per pipeline rank. `phase` says which decisions the body already carries; the
    verifier checks the body against it.

    Optional inputs for the passes: `architecture` (the transformer shape the layers came
    from), `stage_layers` (an explicit number of layers per stage for
    `conduit-partition-stages`), `microbatch_partitions` (explicit per-stage micro-batch sizes,
    or the string "auto", for `conduit-split-microbatches`), `source` (the job file) and
    `tokens_per_sample` (the sequence length of a transformer; what converts samples into
    tokens for throughput).

    ```mlir
    pipe.model @demo phase model attributes {
        parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1,
            schedule = "1f1b", group_size = 2, microbatches = 4, microbatch_size = 1,
            sharding = "none", checkpointing = "none", fsdp_window = 2,
            rank_order = "data-inner">,
        cluster = #pipe.cluster<...>, training = #pipe.training<...>} {
      pipe.layer "embedding" embedding params 1024 fwd 64.0 bwd 64.0 activation 16 ...
      pipe.layer "head" head params 1056 fwd 4096.0 bwd 8192.0 activation 2048 ...
    }
    ```
  }];
  let arguments = (ins
    SymbolNameAttr:$sym_name,
    EnumProp<Pipe_Phase>:$phase,
    Pipe_ParallelismAttr:$parallelism,
    Pipe_ClusterAttr:$cluster,
    Pipe_TrainingAttr:$training,
    OptionalAttr<Pipe_TransformerAttr>:$architecture,
    OptionalAttr<DenseI64ArrayAttr>:$stage_layers,
    OptionalAttr<AnyAttr>:$microbatch_partitions,
    OptionalAttr<StrAttr>:$source,
    DefaultValuedAttr<Pipe_IntAttr, "1">:$tokens_per_sample
  );
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$sym_name `phase` $phase attr-dict-with-keyword $body";
  let hasRegionVerifier = 1;
  let extraClassDeclaration = [{
    /// The layers, stages and ranks of the body, in order.
    auto getLayers() { return getBody().front().getOps<LayerOp>(); }
    auto getStages() { return getBody().front().getOps<StageOp>(); }
    auto getRanks() { return getBody().front().getOps<RankOp>(); }
    /// Whether the model has reached `p`.
    bool reached(Phase p) { return getPhase() >= p; }
  }];
}

def Pipe_LayerOp : Pipe_Op<"layer", [HasParent<"ModelOp">]> {
  let summary = "one layer of the model with its costs per sample";
  let description = [{
    A layer of the model chain, in model order. Costs are per sample (one sequence for a
    transformer), so that a micro-batch of b samples costs b times as much and unequal
    micro-batches need no other representation:

    * `params`: parameter count;
    * `fwd_flops`, `bwd_flops`: forward and backward FLOPs (the backward computes input and
      weight gradients; with checkpointing a forward is added on top);
    * `bwd_weight_flops` (`wgrad`): the part of `bwd_flops` that computes weight gradients
      (W); the rest is the input gradient (I). Split-backward schedules run them apart;
    * `activation_bytes`: bytes kept from the forward for the backward without checkpointing;
    * `checkpoint_bytes`: bytes kept with full checkpointing (the layer's input);
    * `output_bytes`: bytes of the output, what crosses a stage boundary;
    * `weight_gradient_bytes` (`wgrad_bytes`, optional): bytes a split backward keeps from the
      input gradient to the deferred weight gradient (the inputs and output gradients of the
      layer's weight GEMMs); without it the memory plan charges the layer's activations;
    * `replicated_params`, `replicated_activation_bytes` (`replicated_activation`), optional:
      what tensor parallelism does not split (every rank of a tensor group holds it whole):
      norms, the biases added after a row-parallel reduction, a learned position table, and
      the activations those read (Megatron-LM's partitioning). The rest is divided by T; with
      sequence parallelism the activations are all divided. Absent: 0 (all divided);
    * `selective_bytes` (`selective`, optional): the part of `activation_bytes` that
      selective checkpointing recomputes in the backward instead of keeping: what the job's
      `recompute_modules` drop (by default the attention core's softmax probabilities).
      Absent: 0 (selective keeps everything).

    ```mlir
    pipe.layer "block.0" block params 7087872 fwd 14495514624.0 bwd 28991029248.0
        wgrad 14495514624.0 activation 50331648 checkpoint 1572864 output 1572864
        selective 25165824
    ```
  }];
  let arguments = Pipe_LayerArguments;
  let assemblyFormat = Pipe_LayerFormat;
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Partitioned level
//===----------------------------------------------------------------------===//

def Pipe_StageOp : Pipe_Op<"stage", [HasParent<"ModelOp">]> {
  let summary = "a contiguous range of layers, its rank and its micro-batches";
  let description = [{
    Stage `index` runs layers `[first_layer, end_layer)` (indices into the model's layer
    chain). From the `placed` phase on it names its pipeline `rank`; from the `split` phase on,
    `samples` holds the boundaries of its micro-batches: micro-batch j covers samples
    `[samples[j], samples[j+1])` of the replica's batch.

    ```mlir
    pipe.stage 1 layers [3, 5) rank 1 samples [0, 2, 4, 8]
    ```
  }];
  let arguments = (ins
    Pipe_IntAttr:$index,
    Pipe_IntAttr:$first_layer,
    Pipe_IntAttr:$end_layer,
    OptionalAttr<Pipe_IntAttr>:$rank,
    OptionalAttr<DenseI64ArrayAttr>:$samples
  );
  let assemblyFormat = [{
    $index `layers` ` ` `[` $first_layer `,` $end_layer `)` (`rank` $rank^)? (`samples` $samples^)?
    attr-dict
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Number of micro-batches (0 before the `split` phase).
    int64_t getNumMicrobatches() {
      auto s = getSamples();
      return s ? static_cast<int64_t>(s->size()) - 1 : 0;
    }
  }];
}

//===----------------------------------------------------------------------===//
// Scheduled level
//===----------------------------------------------------------------------===//

def Pipe_RankOp : Pipe_Op<"rank", [
    HasParent<"ModelOp">, NoTerminator, SingleBlock, NoRegionArguments]> {
  let summary = "the ordered work of one pipeline rank";
  let description = [{
    The body is the rank's program in execution order: compute ops from the `scheduled` phase
    on, communication ops from the `communicating` phase on. Every data-parallel replica of the
    rank runs the same program. `peak_memory` (bytes), once `conduit-plan-memory` has run, is
    the most memory the rank needs at any point of the step.

    ```mlir
    pipe.rank 0 {
      pipe.forward stage 0 mb 0
      pipe.backward stage 0 mb 0
    }
    ```
  }];
  let arguments = (ins Pipe_IntAttr:$rank, OptionalAttr<Pipe_IntAttr>:$peak_memory);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$rank attr-dict-with-keyword $body";
  let hasRegionVerifier = 1;
}

class Pipe_ComputeOp<string mnemonic, string what> : Pipe_Op<mnemonic, [HasParent<"RankOp">]> {
  let summary = what # " of one micro-batch on one stage";
  let arguments = (ins I32Prop:$stage, I32Prop:$microbatch);
  let assemblyFormat = "`stage` $stage `mb` $microbatch attr-dict";
  let hasVerifier = 1;
}

def Pipe_ForwardOp : Pipe_ComputeOp<"forward", "forward"> {
  let description = [{
    Runs the forward of micro-batch `mb` (in the stage's own partition) through `stage`. It
    needs the stage's input for the micro-batch's samples: from the data for stage 0, else
    from every overlapping micro-batch of the previous stage.

    `paired` makes the forward and the op after it (a backward or input gradient of another
    micro-batch) one overlapped pair, PyTorch's OVERLAP_F_B: the transfers of both are issued
    together, the two computations run as one step, and the schedule counts what they send
    as leaving at the end of the pair, so that each one's communication hides behind the
    other's computation. With expert parallelism each all-to-all of one half hides behind
    the other half's compute; the CPU runtime interleaves the two at those all-to-alls
    (docs/runtime.md), and a forward's sends leave when it ends.

    ```mlir
    pipe.forward stage 4 mb 3
    pipe.forward stage 1 mb 5 paired
    ```
  }];
  let arguments = (ins I32Prop:$stage, I32Prop:$microbatch, UnitProp:$paired);
  let assemblyFormat = "`stage` $stage `mb` $microbatch (`paired` $paired^)? attr-dict";
}

def Pipe_BackwardOp : Pipe_ComputeOp<"backward", "backward (input and weight gradients)"> {
  let description = [{
    Runs the full backward of micro-batch `mb` through `stage`: input gradients for the
    previous stage and weight gradients accumulated into the stage's gradient buffer. It needs
    the stage's own forward of the micro-batch and, except on the last stage, the output
    gradient from every overlapping micro-batch of the next stage.

    ```mlir
    pipe.backward stage 4 mb 3
    ```
  }];
}

def Pipe_BackwardInputOp : Pipe_ComputeOp<"backward_input", "input gradient (I)"> {
  let description = [{
    The first half of a split backward (Zero Bubble, Qi et al. 2024): computes the input
    gradient of micro-batch `mb` through `stage`, which the previous stage waits for, and keeps
    what the weight gradient needs (the layer inputs and output gradients of its weight GEMMs)
    until `pipe.backward_weight` of the same micro-batch. Its dependencies are those of
    `pipe.backward`.

    ```mlir
    pipe.backward_input stage 4 mb 3
    ```
  }];
}

def Pipe_BackwardWeightOp : Pipe_ComputeOp<"backward_weight", "weight gradient (W)"> {
  let description = [{
    The second half of a split backward: accumulates the weight gradients of micro-batch `mb`
    of `stage` from what its `pipe.backward_input` kept, and releases it. Only the stage's
    gradient reduction and optimizer step wait for it, so schedules place it in time the rank
    would otherwise spend waiting.

    ```mlir
    pipe.backward_weight stage 4 mb 3
    ```
  }];
}

//===----------------------------------------------------------------------===//
// Communication level
//===----------------------------------------------------------------------===//

class Pipe_TransferOp<string mnemonic, string dir> : Pipe_Op<mnemonic, [HasParent<"RankOp">]> {
  let arguments = (ins
    EnumProp<Pipe_TransferKind>:$kind,
    I32Prop:$stage,
    I32Prop:$microbatch,
    I32Prop:$peer,
    I32Prop:$peer_stage,
    I32Prop:$peer_microbatch,
    I64Prop:$begin,
    I64Prop:$end,
    I64Prop:$bytes,
    DefaultValuedProp<I32Prop, "-1">:$batch
  );
  let assemblyFormat = [{
    $kind `stage` $stage `mb` $microbatch }] # dir # [{ $peer `stage` $peer_stage `mb`
    $peer_microbatch `samples` ` ` `[` $begin `,` $end `)` `bytes` $bytes (`batch` $batch^)?
    attr-dict
  }];
  let hasVerifier = 1;
}

def Pipe_SendOp : Pipe_TransferOp<"send", "`to`"> {
  let summary = "send an activation or gradient slice to another pipeline rank";
  let description = [{
    Sends samples `[begin, end)` of what the local (`stage`, `mb`) produced to rank `peer`,
    where (`peer_stage`, `peer_mb`) consumes them: an `activation` goes to the next stage after
    the forward, a `gradient` to the previous stage after the backward. Sends and receives of
    one (sender, receiver) pair match in program order. Transfers with the same non-negative
    `batch` on a rank are issued together (as one NCCL group), which is how two ranks exchange
    an activation and a gradient at the same moment without deadlock.

    ```mlir
    pipe.send activation stage 0 mb 2 to 1 stage 1 mb 2 samples [2, 3) bytes 1572864
    ```
  }];
}

def Pipe_RecvOp : Pipe_TransferOp<"recv", "`from`"> {
  let summary = "receive an activation or gradient slice from another pipeline rank";
  let description = [{
    Receives samples `[begin, end)` for the local (`stage`, `mb`) from rank `peer`, produced
    there by (`peer_stage`, `peer_mb`). It matches the peer's send in per-pair program order.

    ```mlir
    pipe.recv activation stage 1 mb 2 from 0 stage 0 mb 2 samples [2, 3) bytes 1572864
    ```
  }];
}

class Pipe_StageCollectiveOp<string mnemonic, list<Trait> traits = []>
    : Pipe_Op<mnemonic, !listconcat([HasParent<"RankOp">], traits)> {
  let hasVerifier = 1;
}

def Pipe_UnshardOp : Pipe_StageCollectiveOp<"unshard"> {
  let summary = "all-gather a stage's parameters over its data-parallel group";
  let description = [{
    FSDP: gathers the full parameters of `stage` (`bytes` in total, after gathering) from the
    shards held by the data-parallel replicas. Compute on the stage may run only between an
    unshard and the next reshard.

    ```mlir
    pipe.unshard stage 4 bytes 14175744
    ```
  }];
  let arguments = (ins I32Prop:$stage, I64Prop:$bytes);
  let assemblyFormat = "`stage` $stage `bytes` $bytes attr-dict";
}

def Pipe_ReshardOp : Pipe_StageCollectiveOp<"reshard"> {
  let summary = "release a stage's gathered parameters";
  let description = [{
    FSDP: frees the gathered copy of the parameters of `stage`, keeping only the local shard.
    No communication.

    ```mlir
    pipe.reshard stage 4
    ```
  }];
  let arguments = (ins I32Prop:$stage);
  let assemblyFormat = "`stage` $stage attr-dict";
}

def Pipe_ReduceGradOp : Pipe_StageCollectiveOp<"reduce_grad"> {
  let summary = "reduce a stage's gradients over its data-parallel group";
  let description = [{
    Reduces the accumulated gradients of `stage` (`bytes` before reduction) over the
    data-parallel group, once per step after the stage's last backward: a reduce-scatter when
    gradients are sharded (`gradients`, `full`, and `optimizer` sharding), an all-reduce
    without sharding.

    ```mlir
    pipe.reduce_grad stage 4 bytes 28351488 reduce_scatter
    ```
  }];
  let arguments = (ins I32Prop:$stage, I64Prop:$bytes, EnumProp<Pipe_GradReduction>:$reduction);
  let assemblyFormat = "`stage` $stage `bytes` $bytes $reduction attr-dict";
}

def Pipe_TieGradsOp : Pipe_StageCollectiveOp<"tie_grads"> {
  let summary = "add the other copy's gradient to a tied weight's gradient";
  let description = [{
    Tied embeddings: the token table (on the first stage) and the LM head's matrix (on the
    last) are one weight held twice; untied, a model with multi-token prediction modules holds
    the token table twice too, the second copy on the modules' stage (the last, with the head).
    Once per step, after both stages' last backwards and
    before their gradient reductions, each copy's gradient (`bytes`) becomes the sum of both:
    exchanged with rank `peer`, which holds `peer_stage`, or added in place when `peer` is
    this rank (`peer_stage` equals `stage` when one stage holds both). Both copies then take
    the same optimizer step and stay identical.

    ```mlir
    pipe.tie_grads stage 0 with 3 stage 7 bytes 16384000
    ```
  }];
  let arguments = (ins I32Prop:$stage, I32Prop:$peer, I32Prop:$peer_stage, I64Prop:$bytes);
  let assemblyFormat = "`stage` $stage `with` $peer `stage` $peer_stage `bytes` $bytes attr-dict";
}

def Pipe_GatherParamsOp : Pipe_StageCollectiveOp<"gather_params"> {
  let summary = "all-gather a stage's updated parameters after a sharded optimizer step";
  let description = [{
    ZeRO-1 and ZeRO-2: after the optimizer updated this replica's shard of `stage`, gathers the
    updated shards so that every replica holds the full parameters for the next step.

    ```mlir
    pipe.gather_params stage 4 bytes 14175744
    ```
  }];
  let arguments = (ins I32Prop:$stage, I64Prop:$bytes);
  let assemblyFormat = "`stage` $stage `bytes` $bytes attr-dict";
}

def Pipe_OptimizerStepOp : Pipe_StageCollectiveOp<"optimizer_step"> {
  let summary = "apply the optimizer to a stage's parameters";
  let description = [{
    Updates the parameters of `stage` (the local shard when the optimizer state is sharded)
    from its reduced gradients. Runs once per step, after the stage's gradient reduction.

    ```mlir
    pipe.optimizer_step stage 4
    ```
  }];
  let arguments = (ins I32Prop:$stage);
  let assemblyFormat = "`stage` $stage attr-dict";
}

#endif // CONDUIT_DIALECTS_PIPE_PIPEOPS_TD
