//===- PlanOps.td - plan operations ---------------------------*- tablegen -*-===//
//
// The program, its stage table, its ranks, and the instructions of a rank's stream.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_DIALECTS_PLAN_PLANOPS_TD
#define CONDUIT_DIALECTS_PLAN_PLANOPS_TD

include "dialects/plan/PlanDialect.td"
include "dialects/pipe/PipeAttrs.td"
include "mlir/IR/BuiltinAttributes.td"
include "mlir/IR/CommonAttrConstraints.td"
include "mlir/IR/OpBase.td"
include "mlir/IR/Properties.td"
include "mlir/IR/SymbolInterfaces.td"

//===----------------------------------------------------------------------===//
// Program structure
//===----------------------------------------------------------------------===//

def Plan_ProgramOp : Plan_Op<"program", [
    Symbol, IsolatedFromAbove, NoTerminator, SingleBlock, NoRegionArguments]> {
  let summary = "an execution plan: configuration, layers, stages and rank programs";
  let description = [{
    The body holds the layer chain (`plan.layer`), the stage table (`plan.stage`, one per
    stage, in order), then one `plan.rank` per pipeline rank, in order. Every data-parallel
    replica of a pipeline rank runs that rank's program. `groups` lists the collective groups:
    group g spans every data-parallel replica of the pipeline ranks `groups[g]`; a collective
    names its group, and every member rank issues that group's collectives in the same order.
    `architecture` is present when the model is a transformer the runtime can build;
    `tokens_per_sample` converts samples into tokens for throughput.

    ```mlir
    plan.program @demo attributes {parallelism = #pipe.parallelism<...>,
        cluster = #pipe.cluster<...>, training = #pipe.training<...>,
        groups = [array<i64: 0>, array<i64: 1>], tokens_per_sample = 32} {
      plan.layer "embedding" embedding params 4096 fwd 64.0 bwd 64.0 activation 16 ...
      ...
      plan.stage 0 rank 0 layers [0, 3) params 4096 samples [0, 1, 2]
      plan.stage 1 rank 1 layers [3, 5) params 4224 samples [0, 1, 2]
      plan.rank 0 events 0 slots [] {
        plan.forward stage 0 mb 0 on 0
        ...
      }
      plan.rank 1 events 0 slots [] { ... }
    }
    ```
  }];
  let arguments = (ins
    SymbolNameAttr:$sym_name,
    Pipe_ParallelismAttr:$parallelism,
    Pipe_ClusterAttr:$cluster,
    Pipe_TrainingAttr:$training,
    TypedArrayAttrBase<DenseI64ArrayAttr, "collective groups">:$groups,
    Pipe_IntAttr:$tokens_per_sample,
    OptionalAttr<Pipe_TransformerAttr>:$architecture,
    OptionalAttr<StrAttr>:$source
  );
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$sym_name attr-dict-with-keyword $body";
  let hasRegionVerifier = 1;
  let extraClassDeclaration = [{
    auto getLayers() { return getBody().front().getOps<LayerOp>(); }
    auto getStages() { return getBody().front().getOps<StageOp>(); }
    auto getRanks() { return getBody().front().getOps<RankOp>(); }
  }];
}

def Plan_LayerOp : Plan_Op<"layer", [HasParent<"ProgramOp">]> {
  let summary = "one layer of the model, as the runtime builds and the simulator costs it";
  let description = [{
    The same fields as `pipe.layer`: parameters and per-sample costs. The runtime builds layer
    i of the chain from them (and from the program's architecture, for transformers); the
    simulator derives compute times from them.

    ```mlir
    plan.layer "block.0" block params 49984 fwd 3407872.0 bwd 6815744.0 activation 147456
        checkpoint 8192 output 8192
    ```
  }];
  let arguments = Pipe_LayerArguments;
  let assemblyFormat = Pipe_LayerFormat;
  let hasVerifier = 1;
}

def Plan_StageOp : Plan_Op<"stage", [HasParent<"ProgramOp">]> {
  let summary = "one entry of the stage table";
  let description = [{
    Stage `index` runs layers `[first_layer, end_layer)` on pipeline rank `rank`; it has
    `params` parameters, and its micro-batch j covers samples `[samples[j], samples[j+1])`.

    ```mlir
    plan.stage 1 rank 1 layers [3, 5) params 4224 samples [0, 2, 4]
    ```
  }];
  let arguments = (ins
    I64Prop:$index,
    I64Prop:$rank,
    I64Prop:$first_layer,
    I64Prop:$end_layer,
    I64Prop:$params,
    DenseI64ArrayAttr:$samples
  );
  let assemblyFormat = [{
    $index `rank` $rank `layers` ` ` `[` $first_layer `,` $end_layer `)` `params` $params
    `samples` $samples attr-dict
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    int64_t getNumMicrobatches() { return static_cast<int64_t>(getSamples().size()) - 1; }
  }];
}

def Plan_RankOp : Plan_Op<"rank", [
    HasParent<"ProgramOp">, NoTerminator, SingleBlock, NoRegionArguments]> {
  let summary = "the instruction list of one pipeline rank";
  let description = [{
    One linear list of instructions, each tagged with its stream. `events` is the number of
    events the list uses (ids `0 .. events-1`), `slots` the size in bytes of each receive
    buffer slot. `peak_memory` is the rank's predicted peak in bytes (from
    `conduit-plan-memory`), for reports and for the runtime to compare against.

    ```mlir
    plan.rank 1 events 1 slots [1572864] {
      plan.recv activation stage 1 mb 0 from 0 stage 0 mb 0 samples [0, 1) bytes 1572864 slot 0 on 1
      plan.signal event 0 on 1
      plan.wait event 0 on 0
      plan.forward stage 1 mb 0 slot 0 on 0
    }
    ```
  }];
  let arguments = (ins I64Prop:$rank, I64Prop:$events, DenseI64ArrayAttr:$slots,
                       OptionalAttr<I64Attr>:$peak_memory);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$rank `events` $events `slots` $slots attr-dict-with-keyword $body";
  let hasRegionVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Instructions
//===----------------------------------------------------------------------===//

class Plan_InstOp<string mnemonic, list<Trait> traits = []>
    : Plan_Op<mnemonic, !listconcat([HasParent<"RankOp">], traits)> {
  let hasVerifier = 1;
}

class Plan_ComputeOp<string mnemonic, string what> : Plan_InstOp<mnemonic> {
  let summary = what # " of one micro-batch on one stage";
  let arguments = (ins I32Prop:$stage, I32Prop:$microbatch,
                       DefaultValuedProp<I32Prop, "-1">:$slot, I32Prop:$stream);
  let assemblyFormat = "`stage` $stage `mb` $microbatch (`slot` $slot^)? `on` $stream attr-dict";
}

def Plan_ForwardOp : Plan_ComputeOp<"forward", "forward"> {
  let description = [{
    Runs the forward of (`stage`, `mb`). Its input comes from receive slot `slot` when the
    previous stage is on another rank (else `slot` is -1 and the input is the previous stage's
    output on this rank, or the data for stage 0).

    `paired`: the forward and the rank's next computation (a backward or input gradient) run
    as one overlapped pair (PyTorch's OVERLAP_F_B); the transfers of the pair are batched.

    ```mlir
    plan.forward stage 1 mb 0 slot 0 on 0
    plan.forward stage 2 mb 3 paired on 0
    ```
  }];
  let arguments = (ins I32Prop:$stage, I32Prop:$microbatch,
                       DefaultValuedProp<I32Prop, "-1">:$slot, I32Prop:$stream, UnitProp:$paired);
  let assemblyFormat =
      "`stage` $stage `mb` $microbatch (`slot` $slot^)? (`paired` $paired^)? `on` $stream attr-dict";
}

def Plan_BackwardOp : Plan_ComputeOp<"backward", "backward"> {
  let description = [{
    Runs the backward of (`stage`, `mb`), accumulating weight gradients. Its output gradient
    comes from receive slot `slot` when the next stage is on another rank (else -1).

    ```mlir
    plan.backward stage 1 mb 0 slot 1 on 0
    ```
  }];
}

def Plan_BackwardInputOp : Plan_ComputeOp<"backward_input", "input gradient"> {
  let description = [{
    The first half of a split backward of (`stage`, `mb`): computes the input gradient (what
    the previous stage waits for) and keeps what the weight gradient needs until
    `plan.backward_weight` of the same micro-batch. Its output gradient comes from receive
    slot `slot` as for `plan.backward`.

    ```mlir
    plan.backward_input stage 1 mb 0 slot 1 on 0
    ```
  }];
}

def Plan_BackwardWeightOp : Plan_ComputeOp<"backward_weight", "weight gradient"> {
  let description = [{
    The second half of a split backward of (`stage`, `mb`): accumulates its weight gradients
    from what `plan.backward_input` kept, and releases that. It receives nothing (`slot` is
    -1) and reads no parameters; the stage's gradient reduction waits for its last one.

    ```mlir
    plan.backward_weight stage 1 mb 0 on 0
    ```
  }];
}

class Plan_TransferOp<string mnemonic, string dir> : Plan_InstOp<mnemonic> {
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
    DefaultValuedProp<I32Prop, "-1">:$slot,
    DefaultValuedProp<I32Prop, "-1">:$batch,
    I32Prop:$stream
  );
  let assemblyFormat = [{
    $kind `stage` $stage `mb` $microbatch }] # dir # [{ $peer `stage` $peer_stage `mb`
    $peer_microbatch `samples` ` ` `[` $begin `,` $end `)` `bytes` $bytes (`slot` $slot^)?
    (`batch` $batch^)? `on` $stream attr-dict
  }];
}

def Plan_SendOp : Plan_TransferOp<"send", "`to`"> {
  let summary = "send samples of an activation or gradient to another rank";
  let description = [{
    Sends samples `[begin, end)` of what (`stage`, `mb`) produced to rank `peer`, for
    (`peer_stage`, `peer_mb`). Matches the peer's receive in per-pair order. Consecutive
    transfers of one stream with the same `batch` are issued as one NCCL group.

    ```mlir
    plan.send activation stage 0 mb 0 to 1 stage 1 mb 0 samples [0, 1) bytes 1572864 on 1
    ```
  }];
}

def Plan_RecvOp : Plan_TransferOp<"recv", "`from`"> {
  let summary = "receive samples of an activation or gradient from another rank";
  let description = [{
    Receives samples `[begin, end)` for (`stage`, `mb`) from rank `peer` into buffer slot
    `slot`, at the offset of `begin` within the micro-batch.

    ```mlir
    plan.recv activation stage 1 mb 0 from 0 stage 0 mb 0 samples [0, 1) bytes 1572864 slot 0 on 1
    ```
  }];
}

class Plan_CollectiveOp<string mnemonic> : Plan_InstOp<mnemonic> {
  let arguments = (ins I32Prop:$stage, I64Prop:$bytes, I32Prop:$group, I32Prop:$stream);
  let assemblyFormat = "`stage` $stage `bytes` $bytes `group` $group `on` $stream attr-dict";
}

def Plan_AllGatherOp : Plan_CollectiveOp<"all_gather"> {
  let summary = "gather a stage's parameters from the shards of its data-parallel group";
  let description = [{
    All-gathers the parameter shards of `stage` over `group` (its data-parallel group) into the
    full parameter buffer (`bytes` after gathering): before compute with full sharding, after
    the optimizer step with optimizer or gradient sharding.

    ```mlir
    plan.all_gather stage 4 bytes 14175744 group 0 on 2
    ```
  }];
}

def Plan_ReduceScatterOp : Plan_CollectiveOp<"reduce_scatter"> {
  let summary = "reduce-scatter a stage's gradients over its data-parallel group";
  let description = [{
    Sums the gradients of `stage` (`bytes` before reduction) over `group`, leaving each replica
    its shard.

    ```mlir
    plan.reduce_scatter stage 4 bytes 28351488 group 0 on 2
    ```
  }];
}

def Plan_AllReduceOp : Plan_CollectiveOp<"all_reduce"> {
  let summary = "all-reduce a stage's gradients over its data-parallel group";
  let description = [{
    Sums the gradients of `stage` (`bytes`) over `group` (no sharding).

    ```mlir
    plan.all_reduce stage 4 bytes 28351488 group 0 on 2
    ```
  }];
}

def Plan_TieGradsOp : Plan_InstOp<"tie_grads"> {
  let summary = "sum the two copies of a tied weight's gradient";
  let description = [{
    Tied embeddings: adds to the gradient of the tied weight in `stage` (the first stage's
    token table or the last stage's LM head, `bytes`) the gradient of the other copy, held by
    `peer_stage` on rank `peer` (the same data-parallel replica): both ranks send theirs and
    receive the other's, as one batch, then add. When `peer` is this rank the two copies are
    summed in place (`peer_stage` equals `stage` when one stage holds both). Every rank issues
    it after all its other sends and receives; the stage's reduction and optimizer step wait
    for it.

    ```mlir
    plan.tie_grads stage 0 with 3 stage 7 bytes 16384000 on 1
    ```
  }];
  let arguments = (ins I32Prop:$stage, I32Prop:$peer, I32Prop:$peer_stage, I64Prop:$bytes,
                   I32Prop:$stream);
  let assemblyFormat = [{
    `stage` $stage `with` $peer `stage` $peer_stage `bytes` $bytes `on` $stream attr-dict
  }];
}

class Plan_TensorCollectiveOp<string mnemonic, string what> : Plan_InstOp<mnemonic> {
  let summary = "a collective of the tensor group, issued inside the compute it follows";
  let description = !strconcat([{
    Tensor parallelism: }], what, [{ over the ranks of this rank's tensor group
    (`config.tensor` of them, the same pipeline rank and replica), `bytes` being the whole
    buffer. It is not an instruction of its own: the compute instruction it follows (same
    stage, micro-batch and stream) issues it from inside its layers, and
    runtime/plan/TensorCollectives.h states which collectives each compute issues, in which
    order; the plan verifier refuses a plan whose collectives differ from that list.

    ```mlir
    plan.}], mnemonic, [{ stage 1 mb 3 bytes 1048576 on 0
    ```
  }]);
  let arguments = (ins I32Prop:$stage, I32Prop:$microbatch, I64Prop:$bytes, I32Prop:$stream);
  let assemblyFormat = "`stage` $stage `mb` $microbatch `bytes` $bytes `on` $stream attr-dict";
  let hasVerifier = 1;
}

def Plan_TensorAllReduceOp : Plan_TensorCollectiveOp<"tensor_all_reduce",
    "sums a layer's partial activations (or input gradients)">;
def Plan_TensorAllGatherOp : Plan_TensorCollectiveOp<"tensor_all_gather",
    "gathers sequence-parallel activations (or output gradients) along the sequence">;
def Plan_TensorReduceScatterOp : Plan_TensorCollectiveOp<"tensor_reduce_scatter",
    "sums partial activations (or input gradients) and leaves each rank its sequence part">;

class Plan_ExpertAllToAllOp<string mnemonic, string what> : Plan_InstOp<mnemonic> {
  let summary = "an all-to-all of the expert group, issued inside the compute it follows";
  let description = !strconcat([{
    Expert parallelism (mixture-of-experts blocks, `parallelism.expert` E > 1): }], what, [{
    among the E ranks of this process's expert group, `bytes` being what this rank sends (its
    micro-batch's routed tokens, bounded by the model's stated imbalance). Like a tensor
    collective it is not an instruction of its own: the compute instruction it follows (same
    stage, micro-batch and stream) issues it from inside its layers, in the order
    runtime/plan/TensorCollectives.h lists, which the plan verifier checks. `group` is the
    plan group of this pipeline rank; the expert group inside it is fixed by E and the
    process's replica and tensor rank. `behind` names the compute (stage and micro-batch) it
    hides behind: the other half of a paired step (a forward marked `paired` and the compute
    after it), whose computation runs while it is in flight; `-1 -1` when nothing hides it.

    ```mlir
    plan.}], mnemonic, [{ stage 1 mb 3 bytes 1048576 group 0 behind 6 2 on 0
    ```
  }]);
  let arguments = (ins I32Prop:$stage, I32Prop:$microbatch, I64Prop:$bytes, I32Prop:$group,
                       I32Prop:$peer_stage, I32Prop:$peer_microbatch, I32Prop:$stream);
  let assemblyFormat = [{
    `stage` $stage `mb` $microbatch `bytes` $bytes `group` $group `behind` $peer_stage
    $peer_microbatch `on` $stream attr-dict
  }];
  let hasVerifier = 1;
}

def Plan_ExpertDispatchOp : Plan_ExpertAllToAllOp<"expert_dispatch",
    "sends each routed token to the rank holding its expert (in a backward: the routed tokens' gradients back)">;
def Plan_ExpertCombineOp : Plan_ExpertAllToAllOp<"expert_combine",
    "returns the experts' outputs to the tokens' ranks (in a backward: the outputs' gradients to the experts)">;

class Plan_StageInstOp<string mnemonic> : Plan_InstOp<mnemonic> {
  let arguments = (ins I32Prop:$stage, I32Prop:$stream);
  let assemblyFormat = "`stage` $stage `on` $stream attr-dict";
}

def Plan_FreeOp : Plan_StageInstOp<"free"> {
  let summary = "release a stage's gathered parameters";
  let description = [{
    Frees the full parameter buffer of `stage`, keeping the local shard (full sharding).

    ```mlir
    plan.free stage 4 on 0
    ```
  }];
}

def Plan_OptimizerStepOp : Plan_StageInstOp<"optimizer_step"> {
  let summary = "update a stage's parameters (or their local shard)";
  let description = [{
    Applies the optimizer to `stage` from its reduced gradients, then clears its gradient
    accumulation buffer for the next step.

    ```mlir
    plan.optimizer_step stage 4 on 0
    ```
  }];
}

class Plan_EventOp<string mnemonic> : Plan_InstOp<mnemonic> {
  let arguments = (ins I32Prop:$event, I32Prop:$stream);
  let assemblyFormat = "`event` $event `on` $stream attr-dict";
}

def Plan_SignalOp : Plan_EventOp<"signal"> {
  let summary = "mark the current point of a stream";
  let description = [{
    The event fires once every earlier instruction of stream `stream` has finished.

    ```mlir
    plan.signal event 3 on 1
    ```
  }];
}

def Plan_WaitOp : Plan_EventOp<"wait"> {
  let summary = "hold a stream until an event fires";
  let description = [{
    Later instructions of stream `stream` start only after `event` has fired.

    ```mlir
    plan.wait event 3 on 0
    ```
  }];
}

#endif // CONDUIT_DIALECTS_PLAN_PLANOPS_TD
