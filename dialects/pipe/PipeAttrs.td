//===- PipeAttrs.td - pipe enums and attributes ---------------*- tablegen -*-===//
//
// The configuration of a job as the compiler sees it: parallelism, cluster, training and the
// architecture of a transformer model. Each attribute mirrors one section of the job file, with
// every default filled in, so the IR alone says what the job is.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_DIALECTS_PIPE_PIPEATTRS_TD
#define CONDUIT_DIALECTS_PIPE_PIPEATTRS_TD

include "dialects/pipe/PipeDialect.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/CommonAttrConstraints.td"
include "mlir/IR/EnumAttr.td"
include "mlir/IR/Properties.td"

//===----------------------------------------------------------------------===//
// Enums
//===----------------------------------------------------------------------===//

class Pipe_Enum<string name, string summary, list<EnumCase> cases>
    : I32Enum<name, summary, cases> {
  let cppNamespace = "::conduit::pipe";
}

def Pipe_Phase : Pipe_Enum<"Phase", "compilation phase of a pipe.model", [
  I32EnumCase<"Model", 0, "model">,
  I32EnumCase<"Partitioned", 1, "partitioned">,
  I32EnumCase<"Placed", 2, "placed">,
  I32EnumCase<"Split", 3, "split">,
  I32EnumCase<"Scheduled", 4, "scheduled">,
  I32EnumCase<"Communicating", 5, "communicating">
]>;

def Pipe_LayerKind : Pipe_Enum<"LayerKind", "kind of a layer", [
  I32EnumCase<"Embedding", 0, "embedding">,
  I32EnumCase<"Block", 1, "block">,
  I32EnumCase<"Head", 2, "head">,
  I32EnumCase<"Custom", 3, "custom">
]>;

def Pipe_ScheduleKind : Pipe_Enum<"ScheduleKind", "pipeline schedule", [
  I32EnumCase<"GPipe", 0, "gpipe">,
  I32EnumCase<"OneFOneB", 1, "1f1b">,
  I32EnumCase<"DepthFirst", 2, "depth-first">,
  I32EnumCase<"BreadthFirst", 3, "breadth-first">,
  I32EnumCase<"ZeroBubbleH1", 4, "zb-h1">,
  I32EnumCase<"InterleavedZeroBubble", 5, "interleaved-zb">,
  I32EnumCase<"ZeroBubbleV", 6, "zbv">,
  I32EnumCase<"DualPipeV", 7, "dualpipev">
]>;

def Pipe_Placement : Pipe_Enum<"Placement", "stage placement", [
  I32EnumCase<"Loop", 0, "loop">,
  I32EnumCase<"V", 1, "v">
]>;

def Pipe_Sharding : Pipe_Enum<"Sharding", "data-parallel sharding mode", [
  I32EnumCase<"None", 0, "none">,
  I32EnumCase<"Optimizer", 1, "optimizer">,
  I32EnumCase<"Gradients", 2, "gradients">,
  I32EnumCase<"Full", 3, "full">
]>;

def Pipe_GradientReduction : Pipe_Enum<"GradientReduction", "when sharded gradients are reduced", [
  I32EnumCase<"Step", 0, "step">,
  I32EnumCase<"Run", 1, "run">
]>;

def Pipe_Checkpointing : Pipe_Enum<"Checkpointing", "activation checkpointing mode", [
  I32EnumCase<"None", 0, "none">,
  I32EnumCase<"Full", 1, "full">,
  I32EnumCase<"Selective", 2, "selective">,
  I32EnumCase<"Blocks", 3, "blocks">
]>;

// What selective checkpointing recomputes (the job's parallelism.recompute_modules); the bits
// are runtime::RecomputeModule's (passes/PlanExport.cpp asserts it).
def Pipe_RecomputeModule : I32BitEnum<"RecomputeModule", "modules selective checkpointing recomputes", [
  I32BitEnumCaseBit<"CoreAttn", 0, "core_attn">,
  I32BitEnumCaseBit<"LayerNorm", 1, "layernorm">,
  I32BitEnumCaseBit<"Mlp", 2, "mlp">,
  I32BitEnumCaseBit<"MoeAct", 3, "moe_act">,
  I32BitEnumCaseBit<"MlaUpProj", 4, "mla_up_proj">,
  I32BitEnumCaseBit<"Op", 5, "op">
]> {
  let cppNamespace = "::conduit::pipe";
  let separator = ", ";
}

def Pipe_RankOrder : Pipe_Enum<"RankOrder", "order of the (pipeline, data) axes in the global rank", [
  I32EnumCase<"DataInner", 0, "data-inner">,
  I32EnumCase<"PipelineInner", 1, "pipeline-inner">
]>;

def Pipe_DType : Pipe_Enum<"DType", "training data type", [
  I32EnumCase<"BF16", 0, "bf16">,
  I32EnumCase<"FP16", 1, "fp16">,
  I32EnumCase<"FP32", 2, "fp32">,
  I32EnumCase<"FP8", 3, "fp8">
]>;

def Pipe_MasterWeights : Pipe_Enum<"MasterWeights", "where the fp32 values the optimizer updates live", [
  I32EnumCase<"Separate", 0, "separate">,
  I32EnumCase<"Parameters", 1, "parameters">
]>;

def Pipe_Fp8Scaling : Pipe_Enum<"Fp8Scaling", "how FP8 casts find their scales", [
  I32EnumCase<"Delayed", 0, "delayed">,
  I32EnumCase<"Current", 1, "current">
]>;

def Pipe_OptimizerKernels : Pipe_Enum<"OptimizerKernels", "how the optimizer's update runs", [
  I32EnumCase<"Fused", 0, "fused">,
  I32EnumCase<"Foreach", 1, "foreach">,
  I32EnumCase<"PerTensor", 2, "per_tensor">
]>;

def Pipe_AdamMoments : Pipe_Enum<"AdamMoments", "how Adam stores its two moments", [
  I32EnumCase<"FP32", 0, "fp32">,
  I32EnumCase<"BF16", 1, "bf16">
]>;

def Pipe_AttentionKind : Pipe_Enum<"AttentionKind", "attention kernel", [
  I32EnumCase<"Flash", 0, "flash">,
  I32EnumCase<"Eager", 1, "eager">,
  I32EnumCase<"Flash2", 2, "flash2">,
  I32EnumCase<"FlashTriton", 3, "flash_triton">
]>;

def Pipe_ElementwiseKind : Pipe_Enum<"ElementwiseKind", "how the element-wise operations run", [
  I32EnumCase<"Fused", 0, "fused">,
  I32EnumCase<"Eager", 1, "eager">,
  I32EnumCase<"EagerFusedNorm", 2, "eager_fused_norm">
]>;

def Pipe_RouterKind : Pipe_Enum<"RouterKind", "how a mixture of experts scores its experts", [
  I32EnumCase<"Softmax", 0, "softmax">,
  I32EnumCase<"Sigmoid", 1, "sigmoid">
]>;

def Pipe_RopeType : Pipe_Enum<"RopeType", "a rotary context extension", [
  I32EnumCase<"Default", 0, "default">,
  I32EnumCase<"Linear", 1, "linear">,
  I32EnumCase<"Llama3", 2, "llama3">,
  I32EnumCase<"Yarn", 3, "yarn">,
  I32EnumCase<"Dynamic", 4, "dynamic">
]>;

def Pipe_DispatchKind : Pipe_Enum<"DispatchKind", "how the expert all-to-alls move a routed token", [
  I32EnumCase<"PerExpert", 0, "per_expert">,
  I32EnumCase<"PerNode", 1, "per_node">
]>;

def Pipe_DropPolicy : Pipe_Enum<"DropPolicy", "which of an expert's assignments a capacity drops", [
  I32EnumCase<"Position", 0, "position">,
  I32EnumCase<"Probs", 1, "probs">
]>;

def Pipe_ExpertKernels : Pipe_Enum<"ExpertKernels", "whose kernels compute the routed experts", [
  I32EnumCase<"Grouped", 0, "grouped">,
  I32EnumCase<"Megatron", 1, "megatron">
]>;

def Pipe_Optimizer : Pipe_Enum<"Optimizer", "optimizer", [
  I32EnumCase<"Adam", 0, "adam">,
  I32EnumCase<"SGD", 1, "sgd">
]>;

def Pipe_MlpKind : Pipe_Enum<"MlpKind", "feed-forward block", [
  I32EnumCase<"Gelu", 0, "gelu">,
  I32EnumCase<"SwiGLU", 1, "swiglu">
]>;

def Pipe_NormKind : Pipe_Enum<"NormKind", "normalisation layer", [
  I32EnumCase<"LayerNorm", 0, "layernorm">,
  I32EnumCase<"RMSNorm", 1, "rmsnorm">
]>;

def Pipe_PositionKind : Pipe_Enum<"PositionKind", "position encoding", [
  I32EnumCase<"Learned", 0, "learned">,
  I32EnumCase<"Rotary", 1, "rotary">
]>;

def Pipe_BiasKind : Pipe_Enum<"BiasKind", "which linear layers have a bias", [
  I32EnumCase<"All", 0, "all">,
  I32EnumCase<"QKV", 1, "qkv">,
  I32EnumCase<"None", 2, "none">
]>;

def Pipe_DataKind : Pipe_Enum<"DataKind", "where training tokens come from", [
  I32EnumCase<"Synthetic", 0, "synthetic">,
  I32EnumCase<"Tokens", 1, "tokens">,
  I32EnumCase<"Text", 2, "text">
]>;

def Pipe_TokenType : Pipe_Enum<"TokenType", "element type of a token file", [
  I32EnumCase<"UInt16", 0, "uint16">,
  I32EnumCase<"UInt32", 1, "uint32">
]>;

def Pipe_TransferKind : Pipe_Enum<"TransferKind", "what a point-to-point transfer carries", [
  I32EnumCase<"Activation", 0, "activation">,
  I32EnumCase<"Gradient", 1, "gradient">
]>;

def Pipe_GradReduction : Pipe_Enum<"GradReduction", "collective that reduces gradients", [
  I32EnumCase<"ReduceScatter", 0, "reduce_scatter">,
  I32EnumCase<"AllReduce", 1, "all_reduce">
]>;

//===----------------------------------------------------------------------===//
// Integer attributes whose values are signed in C++ (I64Attr reads them unsigned, which would
// turn a negative count into a huge one before the verifier sees it).
//===----------------------------------------------------------------------===//

def Pipe_IntAttr : TypedSignlessIntegerAttrBase<I64, "int64_t", "64-bit integer attribute"> {
  let convertFromStorage = "$_self.getValue().getSExtValue()";
}

//===----------------------------------------------------------------------===//
// Attribute parameters
//===----------------------------------------------------------------------===//

// Enums inside attributes print as quoted strings spelled as in the job file ("1f1b" is not a
// valid MLIR keyword).
class Pipe_EnumParam<EnumInfo info> : AttrParameter<info.cppType, info.summary> {
  let parser = "::conduit::pipe::parseEnumString<" # info.cppType # ">($_parser)";
  let printer = "$_printer << '\"' << stringifyEnum($_self) << '\"'";
}

// An enum parameter that may be left out (and is not printed) when it has its default.
class Pipe_DefaultEnumParam<EnumInfo info, string value> : Pipe_EnumParam<info> {
  let defaultValue = info.cppType # "::" # value;
}

// What selective checkpointing recomputes, written as the list of the modules' names,
// ["core_attn"] by default (and then not printed).
def Pipe_RecomputeModulesParam
    : AttrParameter<"::conduit::pipe::RecomputeModule", "recomputed modules"> {
  let parser = "::conduit::pipe::parseRecomputeModules($_parser)";
  let printer = "::conduit::pipe::printRecomputeModules($_printer, $_self)";
  let defaultValue = "::conduit::pipe::RecomputeModule::CoreAttn";
}

// Doubles print with enough digits to round-trip exactly.
def Pipe_F64Param : AttrParameter<"::conduit::pipe::F64", "a double"> {
  let parser = "::conduit::pipe::parseF64($_parser)";
  let printer = "::conduit::pipe::printF64($_printer, $_self)";
}

// A double parameter that may be left out (and is not printed) when it has its default.
class Pipe_DefaultF64Param<string value> : AttrParameter<"::conduit::pipe::F64", "a double"> {
  let parser = "::conduit::pipe::parseF64($_parser)";
  let printer = "::conduit::pipe::printF64($_printer, $_self)";
  let defaultValue = "::conduit::pipe::F64(" # value # ")";
}

// A string parameter that may be left out (and is not printed) when empty.
def Pipe_OptionalStringParam : StringRefParameter<"a string", [{""}]>;

// A double property, printed like Pipe_F64Param (MLIR's FloatAttr falls back to hex for values
// it cannot print in six digits, which hides costs from a reader).
def Pipe_F64Prop : Property<"double", "a double"> {
  let convertToAttribute = [{
    return ::mlir::FloatAttr::get(::mlir::Float64Type::get($_ctxt), $_storage);
  }];
  let convertFromAttribute = [{
    auto value = ::mlir::dyn_cast_if_present<::mlir::FloatAttr>($_attr);
    if (!value)
      return $_diag() << "expected a float attribute";
    $_storage = value.getValueAsDouble();
    return ::mlir::success();
  }];
  let hashProperty = "::llvm::hash_value(::llvm::bit_cast<uint64_t>($_storage))";
  let parser = [{
    auto value = ::conduit::pipe::parseF64($_parser);
    if (::mlir::failed(value))
      return ::mlir::failure();
    $_storage = *value;
  }];
  let printer = "::conduit::pipe::printF64($_printer, $_storage)";
  let writeToMlirBytecode = [{
    $_writer.writeVarInt(::llvm::bit_cast<uint64_t>($_storage));
  }];
  let readFromMlirBytecode = [{
    uint64_t bits;
    if (::mlir::failed($_reader.readVarInt(bits)))
      return ::mlir::failure();
    $_storage = ::llvm::bit_cast<double>(bits);
  }];
}

// The fields of a layer, shared by pipe.layer and plan.layer.
defvar Pipe_LayerArguments = (ins
  StrAttr:$name,
  EnumProp<Pipe_LayerKind>:$kind,
  I64Prop:$params,
  Pipe_F64Prop:$fwd_flops,
  Pipe_F64Prop:$bwd_flops,
  DefaultValuedProp<Pipe_F64Prop, "0.0">:$bwd_weight_flops,
  I64Prop:$activation_bytes,
  I64Prop:$checkpoint_bytes,
  I64Prop:$output_bytes,
  OptionalProp<I64Prop>:$weight_gradient_bytes,
  OptionalProp<I64Prop>:$replicated_params,
  OptionalProp<I64Prop>:$replicated_activation_bytes,
  OptionalProp<I64Prop>:$selective_bytes,
  OptionalProp<I64Prop>:$expert_params
);
defvar Pipe_LayerFormat = [{
  $name $kind `params` $params `fwd` $fwd_flops `bwd` $bwd_flops custom<WeightFlops>($bwd_weight_flops)
  `activation` $activation_bytes
  `checkpoint` $checkpoint_bytes `output` $output_bytes
  (`wgrad_bytes` $weight_gradient_bytes^)?
  (`replicated_params` $replicated_params^)?
  (`replicated_activation` $replicated_activation_bytes^)?
  (`selective` $selective_bytes^)?
  (`expert_params` $expert_params^)? attr-dict
}];

class Pipe_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<Pipe_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

//===----------------------------------------------------------------------===//
// Attributes
//===----------------------------------------------------------------------===//

def Pipe_ParallelismAttr : Pipe_Attr<"Parallelism", "parallelism"> {
  let summary = "how a job is spread over devices";
  let description = [{
    The `parallelism` section of the job file with every default filled in: P pipeline ranks,
    D data-parallel replicas, V stages per device, the schedule (with its group size for
    depth-first), M micro-batches of `microbatch_size` samples per replica and step, the
    sharding and checkpointing modes, the FSDP resident window (in stages), the order of the
    axes in the global rank, the stage placement (`loop`, the default, or `v`; printed only
    when not the default) and whether backwards are split into input and weight gradients
    (`split_backward`, printed only when true; the zero-bubble schedules always split), and
    the tensor-parallel degree T (`tensor`, innermost in the global rank) with Megatron-style
    sequence parallelism (`sequence_parallel`), and the expert-parallel degree E (`expert`:
    groups of E ranks carved out of a pipeline rank's D x T ranks, Megatron-Core's parallel
    folding), whether sequence parallelism's collectives are priced as pipelined with the
    GEMMs (`tensor_comm_overlap`, true by default), and when sharded gradients are reduced
    (`gradient_reduction`: `step`, the default, once per stage per step; `run`, after each run
    of a stage's gradients: a stretch of the rank's backwards on it, forwards aside), and what
    selective checkpointing recomputes (`recompute_modules`: the job's list, `["core_attn"]`
    by default), and with split backwards the most weight gradients a rank defers at once
    (`max_deferred_weight_gradients`: -1, the default, leaves it to the schedule's own rule),
    each printed only when not the default.

    ```mlir
    #pipe.parallelism<pipeline = 4, data = 2, stages_per_device = 2, schedule = "breadth-first",
                      group_size = 4, microbatches = 8, microbatch_size = 1, sharding = "full",
                      checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">
    ```
  }];
  let parameters = (ins
    "int64_t":$pipeline,
    "int64_t":$data,
    "int64_t":$stages_per_device,
    Pipe_EnumParam<Pipe_ScheduleKind>:$schedule,
    "int64_t":$group_size,
    "int64_t":$microbatches,
    "int64_t":$microbatch_size,
    Pipe_EnumParam<Pipe_Sharding>:$sharding,
    Pipe_EnumParam<Pipe_Checkpointing>:$checkpointing,
    "int64_t":$fsdp_window,
    Pipe_EnumParam<Pipe_RankOrder>:$rank_order,
    Pipe_DefaultEnumParam<Pipe_Placement, "Loop">:$placement,
    DefaultValuedParameter<"bool", "false">:$split_backward,
    DefaultValuedParameter<"int64_t", "1">:$tensor,
    DefaultValuedParameter<"bool", "false">:$sequence_parallel,
    DefaultValuedParameter<"int64_t", "1">:$expert,
    DefaultValuedParameter<"bool", "true">:$tensor_comm_overlap,
    Pipe_DefaultEnumParam<Pipe_GradientReduction, "Step">:$gradient_reduction,
    Pipe_RecomputeModulesParam:$recompute_modules,
    DefaultValuedParameter<"int64_t", "-1">:$max_deferred_weight_gradients
  );
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The most weight gradients a rank defers, where the job limits them.
    std::optional<int64_t> getDeferLimit() const {
      if (getMaxDeferredWeightGradients() < 0)
        return std::nullopt;
      return getMaxDeferredWeightGradients();
    }
    /// Total number of stages, S = P * V.
    int64_t getNumStages() const { return getPipeline() * getStagesPerDevice(); }
    /// Samples per replica and step, M * microbatch_size.
    int64_t getBatchSamples() const { return getMicrobatches() * getMicrobatchSize(); }
    /// Devices of the job, P * D * T.
    int64_t getWorldSize() const { return getPipeline() * getData() * getTensor(); }
  }];
}

def Pipe_ClusterAttr : Pipe_Attr<"Cluster", "cluster"> {
  let summary = "the machine a job runs on";
  let description = [{
    A cluster preset with every figure resolved (SI units): peak FLOP/s per GPU, the achievable
    fraction of it (the ceiling of a GEMM's efficiency), device memory bandwidth in bytes/s
    (what bounds memory-bound GEMMs and element-wise work), device memory in bytes, GPUs per
    node, intra- and inter-node bandwidth in bytes/s per GPU per direction, point-to-point
    latency in seconds, and the fixed time one layer costs per micro-batch on top of its work
    (kernel launches). `profile` names a file of measured per-layer times that replaces the
    analytic estimates (empty: none).

    ```mlir
    #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e+14, efficiency = 0.5,
                  memory_bandwidth = 2.039e+12, memory_bytes = 85899345920, gpus_per_node = 8,
                  intra_node_bandwidth = 3.0e+11, inter_node_bandwidth = 2.5e+10,
                  latency_s = 5.0e-06, launch_overhead_s = 0.0, profile = "">
    ```
  }];
  let parameters = (ins
    StringRefParameter<"preset name">:$preset,
    Pipe_F64Param:$peak_flops,
    Pipe_F64Param:$efficiency,
    Pipe_F64Param:$memory_bandwidth,
    "int64_t":$memory_bytes,
    "int64_t":$gpus_per_node,
    Pipe_F64Param:$intra_node_bandwidth,
    Pipe_F64Param:$inter_node_bandwidth,
    Pipe_F64Param:$latency_s,
    Pipe_F64Param:$launch_overhead_s,
    StringRefParameter<"measured profile file, or empty">:$profile
  );
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Pipe_TrainingAttr : Pipe_Attr<"Training", "training"> {
  let summary = "numerics and optimiser of a job";
  let description = [{
    The `training` section of the job file: data type of parameters and activations, optimiser,
    seed for parameter initialisation and data sampling, the learning rate, where the tokens
    come from (`data`, printed unless synthetic: a token file of `data_dtype` elements or a text
    file, at `data_path`, made absolute by the compiler), and where the fp32 values the
    optimizer updates live (`master_weights`, printed unless `separate`: a master copy beside
    16-bit parameters; `parameters`: fp32 parameter shards cast for each use, full sharding
    only), with `fp8` how the casts find their scales (`fp8_scaling`, printed unless
    `delayed`: from an amax history, in the cast; `current`: an amax pass of its own first),
    how Adam stores its moments (`adam_moments`, printed unless `fp32`; `bf16`: rounded to
    bf16 after each update, Adam only), and how the update runs (`optimizer_kernels`, printed
    unless `fused`: one kernel streaming every tensor once; `foreach`: a kernel per operation
    over all tensors, PyTorch's multi-tensor path; `per_tensor`: the operations one tensor at a
    time), which prices the optimizer step and changes nothing it computes.

    ```mlir
    #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-03>
    #pipe.training<dtype = "fp32", optimizer = "sgd", seed = 1, learning_rate = 1.0e-02,
                   data = "tokens", data_path = "/data/train.bin", data_dtype = "uint32">
    ```
  }];
  let parameters = (ins
    Pipe_EnumParam<Pipe_DType>:$dtype,
    Pipe_EnumParam<Pipe_Optimizer>:$optimizer,
    "int64_t":$seed,
    Pipe_F64Param:$learning_rate,
    Pipe_DefaultEnumParam<Pipe_DataKind, "Synthetic">:$data,
    Pipe_OptionalStringParam:$data_path,
    Pipe_DefaultEnumParam<Pipe_TokenType, "UInt16">:$data_dtype,
    Pipe_DefaultEnumParam<Pipe_MasterWeights, "Separate">:$master_weights,
    Pipe_DefaultEnumParam<Pipe_Fp8Scaling, "Delayed">:$fp8_scaling,
    Pipe_DefaultEnumParam<Pipe_AdamMoments, "FP32">:$adam_moments,
    Pipe_DefaultEnumParam<Pipe_OptimizerKernels, "Fused">:$optimizer_kernels
  );
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// Bytes of one parameter or activation element in the training data type.
    int64_t getElementBytes() const;
    /// Bytes of one stored parameter (or shard element): fp32 where the parameters are the
    /// optimizer's master values (`master_weights = parameters`), else getElementBytes().
    int64_t getStoredParameterBytes() const;
    /// Bytes of each of Adam's two moments: 4, or 2 with `adam_moments = bf16`.
    int64_t getMomentBytes() const;
  }];
}

def Pipe_MoeAttr : Pipe_Attr<"Moe", "moe"> {
  let summary = "a mixture of experts in place of the dense MLP";
  let description = [{
    The job's `model.moe`: the blocks from `dense_layers` on replace their MLP by
    `num_experts` routed experts (each an MLP of `expert_ffn_hidden_size`, of the model's
    `mlp` kind), of which a router (`softmax` over the experts, or `sigmoid` per expert with a
    per-expert bias) picks `top_k` per token, their weights renormalised when
    `normalize_top_k`, plus `shared_experts` always-active experts of total hidden size
    `shared_ffn_hidden_size`, whose output `shared_expert_gate` multiplies per token by
    sigmoid(x · w) with a learned vector w (Qwen2-MoE's gate). `aux_loss_coefficient` weighs the load-balancing loss,
    `z_loss_coefficient` the router's z-loss (ST-MoE's squared log-sum-exp of the logits);
    `bias_update_rate` moves the sigmoid router's bias by each step's load instead
    (DeepSeek-V3's auxiliary-loss-free balancing; 0: the bias stays);
    `capacity_factor` bounds each expert's tokens (0: dropless), and `imbalance` is the bound
    on the busiest expert rank's routed tokens over the mean the plan is priced and sized
    with (resolved by the import: the job's value or its documented default).
    `router_groups` cuts the experts into that many consecutive groups, of which each token
    may use the `router_group_top_k` best (DeepSeek-V3's node-limited routing; 1 and 1:
    unlimited). `routed_scaling_factor` multiplies the routed experts' weights after the
    router chose and normalised them (DeepSeek-V3's 2.5; 1, not printed: none). `dispatch`
    says how the all-to-alls move a token: `per_expert`, a copy for each chosen expert, or
    `per_node`, one copy over the network for each node its experts lie on, fanned out inside
    the node (DeepEP). `fp8_dispatch` sends the tokens to the
    experts in FP8 (with `training.dtype` fp8). `kernels` says whose kernels the experts are
    priced as: `grouped`, one grouped GEMM per projection (CUTLASS, DeepGEMM), or
    `megatron`, Megatron-LM's MoE layer as measured; it changes no value and no instruction.

    ```mlir
    #pipe.moe<num_experts = 8, top_k = 2, expert_ffn_hidden_size = 14336,
              normalize_top_k = true, aux_loss_coefficient = 0.02, imbalance = 1.1>
    ```
  }];
  let parameters = (ins
    "int64_t":$num_experts,
    "int64_t":$top_k,
    "int64_t":$expert_ffn_hidden_size,
    Pipe_DefaultEnumParam<Pipe_RouterKind, "Softmax">:$router,
    DefaultValuedParameter<"bool", "false">:$normalize_top_k,
    Pipe_DefaultF64Param<"0.0">:$aux_loss_coefficient,
    DefaultValuedParameter<"int64_t", "0">:$shared_experts,
    DefaultValuedParameter<"int64_t", "0">:$shared_ffn_hidden_size,
    DefaultValuedParameter<"int64_t", "0">:$dense_layers,
    Pipe_DefaultF64Param<"0.0">:$capacity_factor,
    Pipe_DefaultF64Param<"1.0">:$imbalance,
    DefaultValuedParameter<"int64_t", "1">:$router_groups,
    DefaultValuedParameter<"int64_t", "1">:$router_group_top_k,
    Pipe_DefaultEnumParam<Pipe_DispatchKind, "PerExpert">:$dispatch,
    DefaultValuedParameter<"bool", "false">:$fp8_dispatch,
    Pipe_DefaultEnumParam<Pipe_ExpertKernels, "Grouped">:$kernels,
    Pipe_DefaultF64Param<"0.0">:$bias_update_rate,
    Pipe_DefaultF64Param<"1.0">:$routed_scaling_factor,
    DefaultValuedParameter<"bool", "false">:$shared_expert_gate,
    Pipe_DefaultF64Param<"0.0">:$z_loss_coefficient,
    Pipe_DefaultEnumParam<Pipe_DropPolicy, "Position">:$drop_policy
  );
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Pipe_LatentAttentionAttr : Pipe_Attr<"LatentAttention", "latent_attention"> {
  let summary = "multi-head latent attention (DeepSeek-V2/V3)";
  let description = [{
    Queries through a rank-`q_lora_rank` projection (0: projected directly), keys and values
    through a shared rank-`kv_lora_rank` latent; each query and key head has
    `qk_nope_head_dim` dimensions without positions and `qk_rope_head_dim` rotary ones, each
    value head `v_head_dim`. Named as DeepSeek's config.json names them. `rope_interleave`
    (printed when true) says the model's Hugging Face weights pair rotary dimensions 2i and
    2i + 1, as DeepSeek's releases do; it changes how weights are read and written, not what
    is planned.

    ```mlir
    #pipe.latent_attention<q_lora_rank = 1536, kv_lora_rank = 512, qk_nope_head_dim = 128,
                           qk_rope_head_dim = 64, v_head_dim = 128>
    ```
  }];
  let parameters = (ins
    "int64_t":$q_lora_rank,
    "int64_t":$kv_lora_rank,
    "int64_t":$qk_nope_head_dim,
    "int64_t":$qk_rope_head_dim,
    "int64_t":$v_head_dim,
    DefaultValuedParameter<"bool", "false">:$rope_interleave
  );
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Pipe_RopeScalingAttr : Pipe_Attr<"RopeScaling", "rope_scaling"> {
  let summary = "a rotary context extension (Hugging Face's rope_scaling)";
  let description = [{
    How the rotary frequencies are changed to extend the context `factor` times
    (runtime/plan/Rotary.h): `linear` interpolates every position; `llama3` (Llama 3.1)
    interpolates wavelengths above `original_max_position_embeddings / low_freq_factor`, keeps
    those below `/ high_freq_factor` and blends between; `yarn` ramps from kept to interpolated
    dimensions between those turning `beta_fast` and `beta_slow` times within the original
    context (ends rounded outwards unless `truncate` is false), multiplies cos and sin by
    `attention_factor`, and with `mscale_all_dim` (DeepSeek) multiplies latent attention's
    softmax scale by (0.1 · mscale_all_dim · ln factor + 1)²; `dynamic` (dynamic NTK scaling)
    raises the base when the sequence runs past `original_max_position_embeddings`. Named as
    Hugging Face's configs name them. It changes what the runtime computes, not what the compiler plans.

    ```mlir
    #pipe.rope_scaling<rope_type = "yarn", factor = 40.0,
                       original_max_position_embeddings = 4096, mscale_all_dim = 1.0>
    ```
  }];
  let parameters = (ins
    Pipe_EnumParam<Pipe_RopeType>:$rope_type,
    Pipe_DefaultF64Param<"1.0">:$factor,
    DefaultValuedParameter<"int64_t", "0">:$original_max_position_embeddings,
    Pipe_DefaultF64Param<"1.0">:$low_freq_factor,
    Pipe_DefaultF64Param<"4.0">:$high_freq_factor,
    Pipe_DefaultF64Param<"32.0">:$beta_fast,
    Pipe_DefaultF64Param<"1.0">:$beta_slow,
    DefaultValuedParameter<"bool", "true">:$truncate,
    Pipe_DefaultF64Param<"1.0">:$attention_factor,
    Pipe_DefaultF64Param<"0.0">:$mscale_all_dim
  );
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Pipe_TransformerAttr : Pipe_Attr<"Transformer", "transformer"> {
  let summary = "architecture of a decoder-only transformer";
  let description = [{
    The shape of a transformer model, kept beside its layers so that the runtime can build the
    real model: the layer chain is `embedding`, `num_layers` blocks, then `head` (final norm,
    LM head and loss). Variants cover GPT-2/3 (`gelu`, `layernorm`, `learned` positions) and
    Llama, Mistral and Qwen (`swiglu`, `rmsnorm`, `rotary`, grouped-query attention). `bias`
    says which linear layers carry a bias: all (GPT), only Q/K/V (Qwen) or none (Llama).
    `rope_theta` is the rotary base and `norm_eps` the norms' epsilon (printed when not
    10000 and 1e-5). `attention` is the kernel the cost model prices: `flash` (fused, no
    s x s scores kept; the default, not printed), `eager`, `flash2` or `flash_triton`;
    `elementwise` how the cost model runs the norms, activations, rotary positions and loss:
    `fused` (one kernel each; the default, not printed), `eager` (PyTorch's eager mode, op by
    op) or `eager_fused_norm` (eager with the RMSNorm one kernel). `head_dim` is an explicit
    per-head width (0, not printed: hidden_size / num_heads; Qwen3 sets it), `qk_norm` an
    RMSNorm on each head's queries and keys (Qwen3); `mtp_layers` the multi-token
    prediction modules after the blocks (DeepSeek-V3's depth; 0, not printed: none), whose
    layers follow the blocks in the chain, before `head`, and `mtp_loss_coefficient` the
    weight λ of their losses, λ/D times their sum (0.1, not printed); `latent_attention` (#pipe.latent_attention)
    replaces the attention's projections, and `moe` (#pipe.moe) the MLP of the blocks after
    its `dense_layers`; `rope_scaling` (#pipe.rope_scaling) extends the rotary positions'
    context.

    ```mlir
    #pipe.transformer<num_layers = 12, hidden_size = 768, num_heads = 12, num_kv_heads = 12,
                      ffn_hidden_size = 3072, seq_length = 1024, vocab_size = 50257,
                      mlp = "gelu", norm = "layernorm", position = "learned",
                      tie_embeddings = false, bias = "all">
    ```
  }];
  let parameters = (ins
    "int64_t":$num_layers,
    "int64_t":$hidden_size,
    "int64_t":$num_heads,
    "int64_t":$num_kv_heads,
    "int64_t":$ffn_hidden_size,
    "int64_t":$seq_length,
    "int64_t":$vocab_size,
    Pipe_EnumParam<Pipe_MlpKind>:$mlp,
    Pipe_EnumParam<Pipe_NormKind>:$norm,
    Pipe_EnumParam<Pipe_PositionKind>:$position,
    "bool":$tie_embeddings,
    Pipe_EnumParam<Pipe_BiasKind>:$bias,
    Pipe_DefaultF64Param<"10000.0">:$rope_theta,
    Pipe_DefaultF64Param<"1e-5">:$norm_eps,
    Pipe_DefaultEnumParam<Pipe_AttentionKind, "Flash">:$attention,
    Pipe_DefaultEnumParam<Pipe_ElementwiseKind, "Fused">:$elementwise,
    DefaultValuedParameter<"int64_t", "0">:$head_dim,
    DefaultValuedParameter<"bool", "false">:$qk_norm,
    DefaultValuedParameter<"int64_t", "0">:$mtp_layers,
    Pipe_DefaultF64Param<"0.1">:$mtp_loss_coefficient,
    OptionalParameter<"LatentAttentionAttr">:$latent_attention,
    OptionalParameter<"MoeAttr">:$moe,
    OptionalParameter<"RopeScalingAttr">:$rope_scaling
  );
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

#endif // CONDUIT_DIALECTS_PIPE_PIPEATTRS_TD
