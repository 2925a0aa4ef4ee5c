//===- JobSpec.h - the job model: model, parallelism, cluster, training -*- C++ -*-===//
//
// The validated, defaults-filled form of a job file (ARCHITECTURE.md §3) as plain structs, and
// the names its enums are spelled with in the file. What the plan records too (schedule,
// sharding, checkpointing, data type, optimizer, data kind, layer kind) is typed by the plan's
// own enums (runtime/plan/Plan.h), so that the job and the plan cannot disagree on them; what
// only the job has is defined here (which schedules split backwards or group micro-batches is
// runtime/plan/ScheduleRules.h's). compiler/ImportJob.cpp turns a job into pipe IR and is the
// only place that converts these enums into the dialect's.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_JOB_JOBSPEC_H
#define CONDUIT_JOB_JOBSPEC_H

#include "job/Cluster.h"
#include "runtime/plan/Plan.h"
#include "runtime/plan/ScheduleRules.h"

#include "absl/types/span.h"

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace conduit {

// Choices of the job file that the plan keeps in another form (a flag, a byte count, the
// transformer's codes) or not at all.

/// Where the stages go: stage s on rank s mod P, or rank r holding stages r and 2P-1-r.
enum class Placement : uint8_t { Loop, V };
/// The order of the (pipeline, data) axes in the global rank.
enum class RankOrder : uint8_t { DataInner, PipelineInner };
/// The element type of a token file.
enum class TokenType : uint8_t { UInt16, UInt32 };
/// The transformer's feed-forward block, normalisation, position encoding and biases, in the
/// order of the plan's codes (runtime::Transformer).
enum class MlpKind : uint8_t { Gelu, SwiGLU };
enum class NormKind : uint8_t { LayerNorm, RMSNorm };
enum class PositionKind : uint8_t { Learned, Rotary };
enum class BiasKind : uint8_t { All, QKV, None };
/// How attention runs: one fused kernel (FlashAttention-style: no s x s scores kept, the
/// backward recomputes them), eagerly (the scores materialised and kept for the backward),
/// one fused kernel of FlashAttention-2's generation (what PyTorch's SDPA and the 2023 stacks
/// ran on Hopper: the same memory as `Flash`, the device's FlashAttention-2 speed), or
/// FlashAttention in Triton (llm-foundry's 2023 `attn_impl: triton`: the same memory, slower
/// than FlashAttention-2 by what FlashAttention-2's paper measured).
enum class AttentionKind : uint8_t { Flash, Eager, Flash2, FlashTriton };
/// Whether attention is one fused kernel (keeps no s x s scores).
constexpr bool fusedAttention(AttentionKind k) { return k != AttentionKind::Eager; }
/// How the element-wise operations around the products run: each norm, activation, rotary
/// embedding and residual one kernel (Transformer Engine, Apex, torch.compile), or PyTorch's
/// eager mode running the reference Llama code op by op (an RMSNorm of fp32 tensor ops,
/// rotary positions through fp32 complex numbers, SiLU and its product two kernels, grouped
/// keys and values repeated to every head, fp32 logits before the loss; LayerNorm and GELU,
/// native kernels, unchanged), or that with the RMSNorm one kernel (torchtitan's
/// `fused_rmsnorm`).
enum class ElementwiseKind : uint8_t { Fused, Eager, EagerFusedNorm };
/// How a mixture of experts scores its experts: softmax over the experts (Mixtral, Qwen), or
/// a sigmoid per expert with a per-expert bias steering the choice (DeepSeek-V3's
/// auxiliary-loss-free balancing), in the order of the plan's code (runtime::Transformer).
enum class RouterKind : uint8_t { Softmax, Sigmoid };
/// How the all-to-alls move a routed token: a copy for each chosen expert (Megatron-Core's
/// `alltoall` dispatcher, NCCL all-to-all), or one copy over the network for each node its
/// experts lie on, fanned out over the node's links there (DeepEP's kernels, DeepSeek-V3's
/// IB-then-NVLink forwarding). The same tokens reach the same experts either way.
enum class DispatchKind : uint8_t { PerExpert, PerNode };
/// Which of an expert's assignments a capacity drops: those past it in the sample's token
/// order (GShard's and Switch Transformer's), or those of the lowest routing weight
/// (Megatron-Core's default `probs` policy).
enum class DropPolicy : uint8_t { Position, Probs };
/// Whose kernels compute the routed experts: one grouped GEMM per projection over a rank's
/// experts, with the tokens' permutation and activation at the memory bandwidth (CUTLASS's
/// and DeepGEMM's grouped kernels; the cost model's tiles and waves), or Megatron-LM's MoE
/// layer, priced as measured on an H100 (slower products and more passes over the routed
/// tokens; docs/cost-model.md, Mixture of experts). The same experts compute the same
/// values either way.
enum class ExpertKernels : uint8_t { Grouped, Megatron };
/// How an FP8 run keeps its linear layers' inputs for their weight gradients: cast, one byte
/// an element (Transformer Engine, so Megatron-Core and NeMo, and DeepSeek-V3), or in the
/// training data type (torchao's float8 training, as torchtitan runs it).
enum class Fp8SavedInputs : uint8_t { Fp8, BF16 };
/// How an FP8 run scales its casts: from the amax history of earlier steps, taken in the cast
/// itself (Transformer Engine's DelayedScaling), or from the tensor's own amax, a pass of its
/// own before the cast (Float8CurrentScaling; torchao's dynamic tensorwise scaling).
enum class Fp8Scaling : uint8_t { Delayed, Current };
/// Where the fp32 values the optimizer updates live with 16-bit training: in a master copy
/// beside the 16-bit parameters (Megatron-Core, DeepSpeed), or in the parameters themselves,
/// fp32 shards cast to the training data type for each use (PyTorch FSDP's mixed precision).
enum class MasterWeights : uint8_t { Separate, Parameters };
/// How the optimizer's update runs: one kernel streaming each tensor's state once (Apex's and
/// Transformer Engine's FusedAdam, PyTorch's `fused=True`), a kernel per operation over all
/// tensors (PyTorch's `foreach` path, its default on GPUs), or the operations one tensor at a
/// time (a Python loop of eager operations, as Composer's DecoupledAdamW). Prices the step only.
enum class OptimizerKernels : uint8_t { Fused, Foreach, PerTensor };

/// The spellings of an enum's values in the job file, in the enum's order: "gpipe", "1f1b", ...
/// for runtime::Schedule. Defined for every enum of the job model.
template <typename Enum> absl::Span<const std::string_view> enumNames();

template <> absl::Span<const std::string_view> enumNames<runtime::Schedule>();
template <> absl::Span<const std::string_view> enumNames<runtime::LayerKind>();
template <> absl::Span<const std::string_view> enumNames<runtime::Sharding>();
template <> absl::Span<const std::string_view> enumNames<runtime::GradientReduction>();
template <> absl::Span<const std::string_view> enumNames<runtime::Checkpointing>();
template <> absl::Span<const std::string_view> enumNames<runtime::DType>();
template <> absl::Span<const std::string_view> enumNames<runtime::Optimizer>();
template <> absl::Span<const std::string_view> enumNames<runtime::AdamMoments>();
template <> absl::Span<const std::string_view> enumNames<runtime::DataKind>();
template <> absl::Span<const std::string_view> enumNames<Placement>();
template <> absl::Span<const std::string_view> enumNames<RankOrder>();
template <> absl::Span<const std::string_view> enumNames<TokenType>();
template <> absl::Span<const std::string_view> enumNames<MlpKind>();
template <> absl::Span<const std::string_view> enumNames<NormKind>();
template <> absl::Span<const std::string_view> enumNames<PositionKind>();
template <> absl::Span<const std::string_view> enumNames<BiasKind>();
template <> absl::Span<const std::string_view> enumNames<AttentionKind>();
template <> absl::Span<const std::string_view> enumNames<ElementwiseKind>();
template <> absl::Span<const std::string_view> enumNames<RouterKind>();
template <> absl::Span<const std::string_view> enumNames<runtime::RopeType>();
template <> absl::Span<const std::string_view> enumNames<DispatchKind>();
template <> absl::Span<const std::string_view> enumNames<DropPolicy>();
template <> absl::Span<const std::string_view> enumNames<ExpertKernels>();
template <> absl::Span<const std::string_view> enumNames<Fp8SavedInputs>();
template <> absl::Span<const std::string_view> enumNames<MasterWeights>();
template <> absl::Span<const std::string_view> enumNames<Fp8Scaling>();
template <> absl::Span<const std::string_view> enumNames<OptimizerKernels>();

/// The spelling of `value` in the job file.
template <typename Enum> std::string_view enumName(Enum value) {
  return enumNames<Enum>()[static_cast<size_t>(value)];
}

/// The value spelled `name`, or nullopt.
template <typename Enum> std::optional<Enum> parseEnum(std::string_view name) {
  absl::Span<const std::string_view> names = enumNames<Enum>();
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == name)
      return static_cast<Enum>(i);
  return std::nullopt;
}

/// One layer of the model chain with its costs per sample (see pipe.layer).
struct LayerSpec {
  std::string name;
  runtime::LayerKind kind = runtime::LayerKind::Custom;
  int64_t params = 0;
  double fwdFlops = 0;
  double bwdFlops = 0;
  /// The weight-gradient part of bwdFlops (W); the rest is the input gradient (I).
  double bwdWeightFlops = 0;
  /// Bytes per sample a deferred weight gradient keeps between I and W; unset: the layer's
  /// activation bytes, an upper bound.
  std::optional<int64_t> weightGradientBytes;
  int64_t activationBytes = 0;
  int64_t checkpointBytes = 0;
  int64_t outputBytes = 0;
  /// What tensor parallelism does not split (see pipe.layer); unset: everything is split.
  std::optional<int64_t> replicatedParams;
  std::optional<int64_t> replicatedActivationBytes;
  /// For a transformer's block, of activationBytes what selective checkpointing drops when it
  /// recomputes each module (indexed by runtime::RecomputeModule bit; selectiveBytesOf sums
  /// the job's); unset for other layers: selective checkpointing keeps all of theirs.
  std::optional<std::array<int64_t, runtime::kRecomputeModuleNames.size()>> moduleBytes;
  /// The part of params in routed experts (divided over the expert group, not the tensor
  /// group); 0 for dense layers.
  int64_t expertParams = 0;
};

/// A mixture of experts in place of the dense MLP of the blocks after the first `denseLayers`
/// (the job's model.moe).
struct MoeSpec {
  int64_t numExperts = 0;
  int64_t topK = 0;
  int64_t expertFfnHiddenSize = 0;
  RouterKind router = RouterKind::Softmax;
  /// The chosen experts' weights renormalised to sum to one.
  bool normalizeTopK = false;
  /// The load-balancing loss's weight (Switch Transformer's); 0: none.
  double auxLossCoefficient = 0;
  /// The router's z-loss weight (ST-MoE's: the squared log-sum-exp of each token's router
  /// logits); 0: none.
  double zLossCoefficient = 0;
  /// The sigmoid router's bias moved by the load after each step (DeepSeek-V3's
  /// auxiliary-loss-free balancing, its update speed γ): each expert's bias rises by this
  /// much when the step's batch gave it fewer than the mean of the experts' assignments and
  /// falls by it when more; 0: the bias stays as it is.
  double biasUpdateRate = 0;
  /// Always-active experts beside the routed ones, and their (total) hidden size.
  int64_t sharedExperts = 0;
  int64_t sharedFfnHiddenSize = 0;
  /// The shared experts' output multiplied per token by sigmoid(x · w), w a learned vector of
  /// the hidden size (Qwen2-MoE's shared_expert_gate).
  bool sharedExpertGate = false;
  /// Leading blocks that keep the dense MLP (ffn_hidden_size).
  int64_t denseLayers = 0;
  /// Assignments an expert takes per sample, as a multiple of the balanced share (seq ×
  /// top_k / experts); unset: dropless.
  std::optional<double> capacityFactor;
  /// Which assignments the capacity drops.
  DropPolicy dropPolicy = DropPolicy::Position;
  /// Bound on the busiest expert rank's routed tokens over the mean; unset: the default
  /// derived from the expert and top-k counts (docs/cost-model.md).
  std::optional<double> imbalance;
  /// Group-limited routing (DeepSeek-V3's node-limited routing): the experts in
  /// `routerGroups` consecutive groups, of which each token may use the `routerGroupTopK`
  /// best; 1 and 1: unlimited.
  int64_t routerGroups = 1, routerGroupTopK = 1;
  DispatchKind dispatch = DispatchKind::PerExpert;
  /// The tokens travel to the experts in FP8 (the forward's dispatch and the backward's
  /// output gradients), one byte an element and a scale per 128, as DeepSeek-V3 sends them.
  bool fp8Dispatch = false;
  ExpertKernels kernels = ExpertKernels::Grouped;
  /// The routed experts' weights multiplied by this after the router chose (and normalised)
  /// them; DeepSeek-V3's routed_scaling_factor (2.5).
  double routedScalingFactor = 1;
};

/// Multi-head latent attention (DeepSeek-V2/V3): queries and keys/values through low-rank
/// projections, with a rotary part of each head kept apart.
struct LatentAttentionSpec {
  int64_t qLoraRank = 0; ///< 0: queries projected directly
  int64_t kvLoraRank = 0;
  int64_t qkNopeHeadDim = 0;
  int64_t qkRopeHeadDim = 0;
  int64_t vHeadDim = 0;
  /// Hugging Face's weights pair rotary dimensions 2i and 2i + 1 (DeepSeek's releases,
  /// rope_interleave true) rather than i and i + d/2: how weights are read and written.
  bool ropeInterleave = false;
};

/// The shape of a decoder-only transformer (see #pipe.transformer).
struct TransformerSpec {
  int64_t numLayers = 0;
  int64_t hiddenSize = 0;
  int64_t numHeads = 0;
  int64_t numKvHeads = 0;
  int64_t ffnHiddenSize = 0;
  int64_t seqLength = 0;
  int64_t vocabSize = 0;
  MlpKind mlp = MlpKind::Gelu;
  NormKind norm = NormKind::LayerNorm;
  PositionKind position = PositionKind::Learned;
  bool tieEmbeddings = false;
  BiasKind bias = BiasKind::All;
  double ropeTheta = 10000; ///< rotary base (Hugging Face's rope_theta)
  /// The rotary context extension (Hugging Face's rope_scaling); type Default: none.
  runtime::RopeScaling ropeScaling;
  double normEps = 1e-5; ///< the norms' epsilon
  AttentionKind attention = AttentionKind::Flash;
  ElementwiseKind elementwise = ElementwiseKind::Fused;
  /// Per-head width; unset: hiddenSize / numHeads (Qwen3 sets head_dim explicitly).
  std::optional<int64_t> headDim;
  /// RMSNorm on each head's queries and keys (Qwen3).
  bool qkNorm = false;
  /// Multi-token prediction modules after the blocks (DeepSeek-V3's depth D, its
  /// num_nextn_predict_layers; Megatron-Core's --mtp-num-layers): module k predicts the token
  /// k + 2 ahead from the previous depth's hidden state and the embedding of the token k + 1
  /// ahead, through a projection, a block of the model's kind and the shared output head.
  int64_t mtpLayers = 0;
  /// The modules' losses' weight λ in the training loss, as λ/D times their sum (DeepSeek-V3's
  /// λ, 0.3 for its first 10 T tokens and 0.1 after, report §4.2; Megatron-Core's
  /// --mtp-loss-scaling-factor, 0.1 by default).
  double mtpLossCoefficient = 0.1;
  std::optional<LatentAttentionSpec> latentAttention;
  std::optional<MoeSpec> moe;

  /// Whether the last stage keeps a copy of the first stage's token table, whose gradients
  /// the two then sum (tie_grads): the head's with tied embeddings, the multi-token prediction
  /// modules' otherwise.
  bool sharesTokenTable() const { return tieEmbeddings || mtpLayers > 0; }
};

struct ModelSpec {
  /// "transformer", "layers" or "hf".
  std::string kind;
  /// The transformer shape for "transformer" and "hf" models.
  std::optional<TransformerSpec> transformer;
  /// The layer chain, in model order.
  std::vector<LayerSpec> layers;
  /// Tokens per sample, for throughput in tokens/s (1 for models without a sequence).
  int64_t tokensPerSample = 1;
};

struct ParallelismSpec {
  int64_t pipeline = 1;
  int64_t data = 1;
  int64_t stagesPerDevice = 1;
  runtime::Schedule schedule = runtime::Schedule::OneFOneB;
  int64_t groupSize = 0; // depth-first group size N; defaults to P
  int64_t microbatches = 1;
  int64_t microbatchSize = 1;
  runtime::Sharding sharding = runtime::Sharding::None;
  runtime::Checkpointing checkpointing = runtime::Checkpointing::None;
  /// With selective checkpointing, what the backward recomputes (runtime::RecomputeModule
  /// bits; by default the attention core).
  uint32_t recomputeModules = runtime::kRecomputeCoreAttention;
  /// What the backward recomputes of each block: recomputeModules with selective
  /// checkpointing, nothing without it.
  uint32_t selectiveModules() const {
    return checkpointing == runtime::Checkpointing::Selective ? recomputeModules : 0;
  }
  int64_t fsdpWindow = 2;
  /// When sharded gradients are reduced: once per stage per step, or after each run of the
  /// rank's backwards on a stage (forwards aside).
  runtime::GradientReduction gradientReduction = runtime::GradientReduction::Step;
  RankOrder rankOrder = RankOrder::DataInner;
  /// Stage placement; "v" for zbv and dualpipev unless the job says otherwise.
  Placement placement = Placement::Loop;
  /// Backwards split into input and weight gradients (implied by the zero-bubble schedules).
  bool splitBackward = false;
  /// With split backwards (read with any schedule, used only there): the most weight gradients
  /// a rank defers at once (0: each runs right after its input gradient). Absent: each
  /// schedule's own rule, lowered by the compiler where the plan would not fit the device
  /// otherwise.
  std::optional<int64_t> maxDeferredWeightGradients;
  /// Tensor-parallel ranks T (the innermost axis of the global rank), and whether the norms'
  /// and residuals' activations are split over them along the sequence.
  int64_t tensor = 1;
  bool sequenceParallel = false;
  /// With sequence parallelism: whether the tensor group's collectives are priced as pipelined
  /// with the compute's GEMMs (Megatron-Core's tp_comm_overlap) or as exposed after them.
  bool tensorCommOverlap = true;
  /// Expert-parallel ranks E: groups of E ranks carved out of a pipeline rank's D x T ranks
  /// (Megatron-Core's parallel folding); E divides D x T and the expert count.
  int64_t expert = 1;
  /// Explicit layers per stage (empty: the partitioner decides).
  std::vector<int64_t> stageLayers;
  /// Explicit micro-batch sizes per stage (empty: equal micro-batches).
  std::vector<std::vector<int64_t>> microbatchPartitions;
  /// "microbatch_partitions": "auto": searched during compilation.
  bool autoPartitions = false;

  int64_t numStages() const { return pipeline * stagesPerDevice; }
  int64_t batchSamples() const { return microbatches * microbatchSize; }
  int64_t worldSize() const { return pipeline * data * tensor; }
};

struct TrainingSpec {
  runtime::DType dtype = runtime::DType::BF16;
  runtime::Optimizer optimizer = runtime::Optimizer::Adam;
  int64_t seed = 1234;
  double learningRate = 1e-3;
  /// Where the tokens come from: "data": {"kind", "path", "dtype"}; the path resolved
  /// against the job file and made absolute.
  runtime::DataKind data = runtime::DataKind::Synthetic;
  std::string dataPath;
  TokenType dataDtype = TokenType::UInt16;
  /// `fp8_saved_inputs`, with dtype FP8 only (unset: Fp8).
  std::optional<Fp8SavedInputs> fp8SavedInputs;
  /// `fp8_scaling`, with dtype FP8 only (unset: Delayed).
  std::optional<Fp8Scaling> fp8Scaling;
  /// `master_weights`, with full sharding and a 16-bit or FP8 dtype only (unset: Separate).
  std::optional<MasterWeights> masterWeights;
  /// `adam_moments`, with Adam only (unset: FP32).
  std::optional<runtime::AdamMoments> adamMoments;
  /// `optimizer_kernels` (unset: Fused).
  std::optional<OptimizerKernels> optimizerKernels;

  int64_t elementBytes() const { return dtype == runtime::DType::FP32 ? 4 : 2; }
  /// Bytes of each of Adam's two moments.
  int64_t momentBytes() const { return adamMoments == runtime::AdamMoments::BF16 ? 2 : 4; }
  /// Bytes of one stored parameter (or shard element): fp32 where the parameters are the
  /// optimizer's master values (master_weights "parameters"), else elementBytes().
  int64_t storedParameterBytes() const {
    return masterWeights == MasterWeights::Parameters ? 4 : elementBytes();
  }
  /// Bytes of one element of the input of a linear layer kept for its weight gradient: one
  /// where an FP8 run keeps them cast, else elementBytes().
  int64_t savedInputBytes() const {
    return dtype == runtime::DType::FP8 &&
                   fp8SavedInputs.value_or(Fp8SavedInputs::Fp8) == Fp8SavedInputs::Fp8
               ? 1
               : elementBytes();
  }
};

struct Job {
  std::string path; // the job file, as given
  std::string name; // the job file's stem, or "name" from the file
  ModelSpec model;
  ParallelismSpec parallelism;
  Cluster cluster;
  TrainingSpec training;
};

} // namespace conduit

#endif // CONDUIT_JOB_JOBSPEC_H
