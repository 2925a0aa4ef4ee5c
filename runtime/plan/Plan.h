//===- Plan.h - the execution plan in memory --------------------*- C++ -*-===//
//
// The plan as plain C++ data: what the plan file holds, what the runtime executes, and what
// the compiler's verifier and simulator check. No MLIR and no FlatBuffers types appear here;
// PlanFile.h converts between this and the file.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_RUNTIME_PLAN_PLAN_H
#define CONDUIT_RUNTIME_PLAN_PLAN_H

#include "runtime/plan/Rotary.h"

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace conduit::runtime {

/// The plan file format this code reads and writes.
constexpr uint32_t kPlanFormatVersion = 5;
/// Feature bits: additions a reader must understand, made without a version change. A reader
/// refuses a plan with a bit it does not know.
/// config.gradient_reduction "run": a stage reduce-scatters more than once a step, each added
/// into the shard; a reader that ignored the field would keep only the last.
constexpr uint64_t kFeatureGradientReductionRun = uint64_t(1) << 0;
/// config.recompute_modules other than the attention core: selective checkpointing drops
/// more than a reader that ignored the field would.
constexpr uint64_t kFeatureRecomputeModules = uint64_t(1) << 1;
/// config.adam_moments bf16: Adam's moments are stored in bf16, half the optimizer state a
/// reader that ignored the field would keep, and rounded after each update.
constexpr uint64_t kFeatureBf16Moments = uint64_t(1) << 2;
/// Group-limited routing (Transformer::routerGroupTopK below routerGroups): an older reader
/// would route over every group.
constexpr uint64_t kFeatureGroupLimitedRouting = uint64_t(1) << 3;
/// config.checkpointing 3 (blocks): an older reader takes the value for a corrupt file.
constexpr uint64_t kFeatureBlocksCheckpointing = uint64_t(1) << 4;
/// transformer.bias_update_rate above 0: the router's bias moves by the load after each
/// step; an older reader would leave it where it is.
constexpr uint64_t kFeatureExpertBiasUpdate = uint64_t(1) << 5;
/// transformer.mtp_layers above 0: the chain holds multi-token prediction modules after the
/// blocks; an older reader would take them for blocks.
constexpr uint64_t kFeatureMtp = uint64_t(1) << 6;
/// transformer.rope_interleave: latent attention's Hugging Face weights hold their rotary
/// parts in interleaved pairs; an older reader would read and write them as halves.
constexpr uint64_t kFeatureRopeInterleave = uint64_t(1) << 7;
/// transformer.rope_scaling other than default: the rotary frequencies (and with yarn their
/// magnitude) are those of a context extension; an older reader would rotate by the base's.
constexpr uint64_t kFeatureRopeScaling = uint64_t(1) << 8;
/// transformer.routed_scaling_factor other than 1: the routed experts' weights are scaled;
/// an older reader would weigh them as the router gives them.
constexpr uint64_t kFeatureRoutedScaling = uint64_t(1) << 9;
/// transformer.shared_expert_gate: the shared experts' output is gated per token by
/// parameters of its own; an older reader would count the block's parameters short.
constexpr uint64_t kFeatureSharedExpertGate = uint64_t(1) << 10;
/// transformer.rope_type dynamic: past rope_original_positions the rotary base grows with the
/// sequence; an older reader would take the type for a corrupt value.
constexpr uint64_t kFeatureDynamicRope = uint64_t(1) << 11;
/// transformer.z_loss_coefficient above 0: the loss adds the router's z-loss; an older reader
/// would train without it.
constexpr uint64_t kFeatureRouterZLoss = uint64_t(1) << 12;
/// transformer.drop_by_weight: a capacity drops an expert's assignments of the lowest routing
/// weight; an older reader would drop those last in token order.
constexpr uint64_t kFeatureDropByWeight = uint64_t(1) << 13;
constexpr uint64_t kKnownFeatures =
    kFeatureGradientReductionRun | kFeatureRecomputeModules | kFeatureBf16Moments |
    kFeatureGroupLimitedRouting | kFeatureBlocksCheckpointing | kFeatureExpertBiasUpdate |
    kFeatureMtp | kFeatureRopeInterleave | kFeatureRopeScaling | kFeatureRoutedScaling |
    kFeatureSharedExpertGate | kFeatureDynamicRope | kFeatureRouterZLoss | kFeatureDropByWeight;

enum class Op : uint8_t {
  Forward,
  Backward,
  Send,
  Recv,
  AllGather,
  ReduceScatter,
  AllReduce,
  Free,
  OptimizerStep,
  Signal,
  Wait,
  BackwardInput,  ///< split backward: the input gradient of a micro-batch (I)
  BackwardWeight, ///< split backward: the weight gradient of an earlier I (W)
  TieGrads,       ///< the token table's two copies' gradients summed (with `peer`)
  /// Tensor parallelism: a collective of the tensor group, issued inside the compute
  /// instruction it follows (TensorCollectives.h lists which, in order).
  TensorAllReduce,
  TensorAllGather,
  TensorReduceScatter,
  /// Expert parallelism: the all-to-alls of a mixture-of-experts block in the expert group,
  /// issued inside the compute instruction they follow like the tensor collectives
  /// (TensorCollectives.h lists which, in order). Dispatch sends each routed token to its
  /// expert's rank; combine returns the experts' outputs. A backward issues them again, for
  /// the gradients, in reverse order.
  ExpertDispatch,
  ExpertCombine,
};
constexpr int kNumOps = 19;

/// Whether `op` is an expert all-to-all (dispatch or combine).
inline bool isExpertAllToAll(Op op) { return op == Op::ExpertDispatch || op == Op::ExpertCombine; }

enum class Transfer : uint8_t { Activation, Gradient };

/// Streams by convention; a plan may use others (below kMaxStreams).
constexpr int kComputeStream = 0;
constexpr int kP2PStream = 1;
constexpr int kCollectiveStream = 2;
constexpr int kMaxStreams = 8;

/// One instruction of a rank's program. The fields are ordered so that it packs into 64 bytes
/// (a plan holds up to millions of them).
struct Instruction {
  Op op = Op::Forward;
  uint8_t stream = 0;
  Transfer kind = Transfer::Activation;
  /// Forward: kPaired when it and the rank's next compute (a backward or input gradient of
  /// another micro-batch) run as one overlapped pair (PyTorch's OVERLAP_F_B). Where the
  /// forward's expert all-to-alls name the partner, the CPU runtime runs the halves together
  /// (Executor::Partner), else one after the other; the pair's transfers carry batches.
  uint8_t flags = 0;
  static constexpr uint8_t kPaired = 1;
  int32_t stage = -1;
  int32_t microbatch = -1;
  int32_t peer = -1;
  int32_t peerStage = -1;
  int32_t peerMicrobatch = -1;
  int32_t slot = -1;
  int32_t group = -1; // collectives: the group
  int32_t batch = -1; // transfers: issued together with the neighbours of the same batch
  int32_t event = -1;
  int64_t begin = 0;
  int64_t end = 0;
  int64_t bytes = 0;

  bool isCompute() const {
    return op == Op::Forward || op == Op::Backward || op == Op::BackwardInput ||
           op == Op::BackwardWeight;
  }
  bool isTransfer() const { return op == Op::Send || op == Op::Recv; }
  bool isCollective() const {
    return op == Op::AllGather || op == Op::ReduceScatter || op == Op::AllReduce;
  }
  bool isTensorCollective() const {
    return op == Op::TensorAllReduce || op == Op::TensorAllGather || op == Op::TensorReduceScatter;
  }
  bool isExpertAllToAll() const { return runtime::isExpertAllToAll(op); }
  /// Whether it is issued inside the compute instruction it follows (tensor collectives and
  /// expert all-to-alls).
  bool isInnerCollective() const { return isTensorCollective() || isExpertAllToAll(); }
  /// Whether it moves data between processes (or may: a tie_grads of one rank sums in place).
  /// Tensor collectives run inside their compute instruction, not on their own.
  bool communicates() const { return isTransfer() || isCollective() || op == Op::TieGrads; }
};
static_assert(sizeof(Instruction) == 64, "an instruction grew: keep it to one cache line");

enum class LayerKind : uint8_t { Embedding, Block, Head, Custom };

struct Layer {
  std::string name;
  LayerKind kind = LayerKind::Custom;
  int64_t params = 0;
  double fwdFlops = 0, bwdFlops = 0;
  double bwdWeightFlops = 0; ///< the weight-gradient part of bwdFlops
  int64_t activationBytes = 0, checkpointBytes = 0, outputBytes = 0;
  /// The part of params in routed experts: divided over the expert group (E) instead of the
  /// tensor group, and reduced over the ranks that hold the same experts.
  int64_t expertParams = 0;
};

struct Stage {
  int32_t index = 0;
  int32_t rank = 0;
  int32_t firstLayer = 0;
  int32_t endLayer = 0;
  int64_t params = 0;
  std::vector<int64_t> samples; // micro-batch boundaries

  int64_t numMicrobatches() const { return static_cast<int64_t>(samples.size()) - 1; }
};

struct Group {
  std::vector<int32_t> ranks;
};

struct RankProgram {
  int32_t rank = 0;
  int32_t events = 0;
  std::vector<int64_t> slots;
  std::vector<Instruction> instructions;
  /// The compiler's predicted peak memory of the rank in bytes; 0 when unknown.
  int64_t peakMemoryBytes = 0;
};

enum class Schedule : uint8_t {
  GPipe,
  OneFOneB,
  DepthFirst,
  BreadthFirst,
  ZeroBubbleH1,
  InterleavedZeroBubble,
  ZeroBubbleV,
  DualPipeV,
};
constexpr int kNumSchedules = 8;
enum class Sharding : uint8_t { None, Optimizer, Gradients, Full };
/// Whether the replicas keep only their shards of the reduced gradients (ZeRO-2 and full
/// sharding): the whole gradients exist only until their reduce-scatter, and
/// gradient_reduction "run" may add several into the shard.
constexpr bool shardsGradients(Sharding s) {
  return s == Sharding::Gradients || s == Sharding::Full;
}
/// When sharded gradients are reduced: once per stage per step, after its last backward; or
/// after each run of the rank's backwards on the stage (forwards aside), each added into the
/// shard (parallelism.gradient_reduction).
enum class GradientReduction : uint8_t { Step, Run };
/// FP8: the blocks' linear layers in FP8 on bf16 parameters and activations (priced by the
/// compiler; conduit-run refuses it).
enum class DType : uint8_t { BF16, FP16, FP32, FP8 };
enum class Optimizer : uint8_t { Adam, SGD };
/// How Adam stores its two moments: fp32, or bf16 (DeepSeek-V3's low-precision optimizer
/// states; Megatron-Core's precision-aware optimizer with --exp-avg-dtype and
/// --exp-avg-sq-dtype bf16), computed in fp32 and rounded to bf16 after each update.
enum class AdamMoments : uint8_t { FP32, BF16 };
/// Activation checkpointing: none; full (each layer's input kept, the layer recomputed in the
/// backward); selective (the parts RecomputeModule names recomputed, Megatron-LM's
/// "selective": by default the attention core); blocks (full for every layer but the
/// embedding and the head, which keep their activations: what Megatron-LM, torchtitan and
/// Composer recompute under their "full").
enum class Checkpointing : uint8_t { None, Full, Selective, Blocks };
/// Whether checkpointing mode `mode` recomputes a layer of kind `kind` whole in the backward
/// (from its kept input), rather than keeping its activations or some of them.
constexpr bool recomputesWhole(Checkpointing mode, LayerKind kind) {
  return mode == Checkpointing::Full ||
         (mode == Checkpointing::Blocks && kind != LayerKind::Embedding && kind != LayerKind::Head);
}
/// Whether mode `mode` recomputes any layer whole.
constexpr bool recomputesWhole(Checkpointing mode) {
  return mode == Checkpointing::Full || mode == Checkpointing::Blocks;
}

/// What selective checkpointing recomputes in the backward instead of keeping, as bits
/// (parallelism.recompute_modules; Megatron-Core's recompute_modules of the same names):
/// the attention core's softmax probabilities; the two norms' outputs; a dense block's MLP;
/// the routed experts' activation outputs; latent attention's up projections. `op`, alone,
/// is torchtitan's op-level policy instead: a block keeps its input, the fused attention's
/// output and every second matrix product's output, and recomputes the rest.
enum RecomputeModule : uint32_t {
  kRecomputeCoreAttention = 1u << 0,
  kRecomputeLayerNorm = 1u << 1,
  kRecomputeMlp = 1u << 2,
  kRecomputeMoeActivation = 1u << 3,
  kRecomputeLatentUpProjection = 1u << 4,
  kRecomputeOp = 1u << 5,
  kRecomputeAll = (1u << 6) - 1,
};
/// The job-file names of RecomputeModule's bits, in bit order.
inline constexpr std::array<std::string_view, 6> kRecomputeModuleNames = {
    "core_attn", "layernorm", "mlp", "moe_act", "mla_up_proj", "op"};
/// The RecomputeModule bit named `name`; none for an unknown name.
inline std::optional<uint32_t> recomputeModuleBit(std::string_view name) {
  for (size_t bit = 0; bit < kRecomputeModuleNames.size(); ++bit)
    if (kRecomputeModuleNames[bit] == name)
      return 1u << bit;
  return std::nullopt;
}
/// The names of RecomputeModule bits `modules`, in bit order.
inline std::vector<std::string> recomputeModuleNames(uint32_t modules) {
  std::vector<std::string> names;
  for (size_t bit = 0; bit < kRecomputeModuleNames.size(); ++bit)
    if (modules & (1u << bit))
      names.emplace_back(kRecomputeModuleNames[bit]);
  return names;
}
/// `"core_attn", "layernorm"`: the names quoted, for messages and JSON.
inline std::string quotedRecomputeModules(uint32_t modules) {
  std::string out;
  for (const std::string &name : recomputeModuleNames(modules))
    out += (out.empty() ? "\"" : ", \"") + name + "\"";
  return out;
}

struct Transformer {
  int64_t numLayers = 0, hiddenSize = 0, numHeads = 0, numKvHeads = 0, ffnHiddenSize = 0,
          seqLength = 0, vocabSize = 0;
  uint8_t mlp = 0;      // 0 gelu, 1 swiglu
  uint8_t norm = 0;     // 0 layernorm, 1 rmsnorm
  uint8_t position = 0; // 0 learned, 1 rotary
  bool tieEmbeddings = false;
  uint8_t bias = 0;         // 0 all, 1 qkv, 2 none
  double ropeTheta = 10000; ///< rotary base (Hugging Face's rope_theta)
  /// The rotary context extension (Hugging Face's rope_scaling); type Default: none.
  RopeScaling ropeScaling;
  double normEps = 1e-5; ///< the norms' epsilon (layer_norm_epsilon / rms_norm_eps)
  /// Per-head width of queries, keys and values; 0: hiddenSize / numHeads. Qwen3 sets it.
  int64_t headDim = 0;
  bool qkNorm = false; ///< RMSNorm on each head's queries and keys (Qwen3)
  /// Multi-token prediction modules after the blocks (DeepSeek-V3): the chain's blocks are
  /// numLayers of the model and then these, before the head, on the last stage.
  int64_t mtpLayers = 0;
  /// Their losses' weight λ: the training loss adds λ / mtpLayers times their sum.
  double mtpLossCoefficient = 0;
  /// Whether the last stage keeps a copy of the first stage's token table, whose gradients
  /// the two sum (TieGrads): the head's with tied embeddings, the multi-token prediction
  /// modules' otherwise.
  bool sharesTokenTable() const { return tieEmbeddings || mtpLayers > 0; }
  /// Multi-head latent attention (DeepSeek-V2/V3); all 0 without it.
  int64_t qLoraRank = 0, kvLoraRank = 0, qkNopeHeadDim = 0, qkRopeHeadDim = 0, vHeadDim = 0;
  /// Latent attention's weights in Hugging Face's interleaved rotary layout (DeepSeek's
  /// releases, rope_interleave true): runtime/weights/HfWeights.h permutes their rotary columns
  /// between it and the halves the runtime rotates. What trains is the same.
  bool ropeInterleave = false;
  /// Mixture of experts; numExperts 0: every block has a dense MLP.
  int64_t numExperts = 0, topK = 0, expertFfnHiddenSize = 0;
  uint8_t router = 0; // 0 softmax, 1 sigmoid (with a per-expert bias)
  bool normalizeTopK = false;
  double auxLossCoefficient = 0;
  /// The router's z-loss weight (ST-MoE, arXiv:2202.08906): each token adds the square of
  /// its router logits' log-sum-exp; 0: none.
  double zLossCoefficient = 0;
  /// With a capacity: an expert keeps a sample's assignments of the highest routing weight
  /// (Megatron-Core's `probs` policy), else the first in the sample's token order.
  bool dropByWeight = false;
  int64_t sharedExperts = 0, sharedFfnHiddenSize = 0;
  /// The shared experts' output multiplied per token by sigmoid(x · w), w hiddenSize
  /// parameters after the shared experts' (Qwen2-MoE's shared_expert_gate).
  bool sharedExpertGate = false;
  int64_t denseLayers = 0;   ///< leading blocks that keep a dense MLP
  double capacityFactor = 0; ///< 0: dropless
  double imbalance = 1;      ///< bound on the busiest expert rank's routed tokens / the mean
  /// Group-limited routing: each token uses the routerGroupTopK best of routerGroups
  /// consecutive groups of experts (1 and 1: unlimited).
  int64_t routerGroups = 1, routerGroupTopK = 1;
  uint8_t dispatch = 0;     // 0 a copy per chosen expert, 1 a network copy per node (DeepEP)
  bool fp8Dispatch = false; ///< tokens to the experts in FP8 (a byte an element, a scale per 128)
  /// The sigmoid router's bias moved by each step's load (DeepSeek-V3's γ); 0: it stays. The
  /// step's choices of each expert travel in the bias's gradient (summed as gradients are) and
  /// the optimizer moves the bias by their sign against the mean instead of by Adam.
  double biasUpdateRate = 0;
  /// The routed experts' weights multiplied by this after the router chose and normalised
  /// them (DeepSeek-V3's routed_scaling_factor, 2.5); the shared experts' are not.
  double routedScalingFactor = 1;

  bool groupLimited() const { return routerGroupTopK < routerGroups; }
  bool balancesBias() const { return biasUpdateRate > 0; }

  bool isMoe() const { return numExperts > 0; }
  bool usesLatentAttention() const { return kvLoraRank > 0; }
  /// Whether block `block` (0-based among the blocks) has experts.
  bool blockHasExperts(int64_t block) const { return isMoe() && block >= denseLayers; }
};

/// Where the training tokens come from (the job's training.data).
enum class DataKind : uint8_t { Synthetic, Tokens, Text };
struct DataSource {
  DataKind kind = DataKind::Synthetic;
  std::string path;       ///< tokens, text: the file, absolute or relative to the plan's job file
  uint8_t tokenBytes = 2; ///< tokens: 2 (uint16) or 4 (uint32)
};

struct Config {
  int32_t pipeline = 1, data = 1, stagesPerDevice = 1;
  Schedule schedule = Schedule::OneFOneB;
  int64_t groupSize = 1, microbatches = 1, microbatchSize = 1;
  Sharding sharding = Sharding::None;
  Checkpointing checkpointing = Checkpointing::None;
  /// RecomputeModule bits: what selective checkpointing recomputes (others: unused).
  uint32_t recomputeModules = kRecomputeCoreAttention;
  int32_t fsdpWindow = 2;
  GradientReduction gradientReduction = GradientReduction::Step;
  bool pipelineInner = false;
  DType dtype = DType::BF16;
  Optimizer optimizer = Optimizer::Adam;
  AdamMoments adamMoments = AdamMoments::FP32; ///< with Adam only
  int64_t seed = 0;
  double learningRate = 1e-3;
  int64_t tokensPerSample = 1;
  bool splitBackward = false; ///< backwards run as I and W
  DataSource dataSource;      ///< where the tokens come from (`data` is the data-parallel degree)
  /// Tensor-parallel ranks T per (pipeline rank, replica): the innermost axis of the global
  /// rank. Every rank of a tensor group runs its pipeline rank's program on its shard of
  /// each layer (Megatron-LM's partitioning).
  int32_t tensor = 1;
  bool sequenceParallel = false; ///< norms and residuals split over the group by sequence
  /// Expert-parallel ranks E (mixtures of experts): groups of E ranks carved out of the
  /// data-parallel and tensor ranks of a pipeline rank (Megatron-Core's parallel folding); the
  /// experts are divided over a group, each expert's parameters reduced over the ranks that
  /// hold it. The world stays P x D x T.
  int32_t expert = 1;
  /// With sequence parallelism: whether the tensor group's collectives run pipelined with
  /// the compute's GEMMs (Megatron-Core's tp_comm_overlap), which the cost model prices as
  /// the longer of the two, or after them, exposed. Predictions only; the runtime issues its
  /// collectives in order either way.
  bool tensorCommOverlap = true;
  std::string preset;
  double peakFlops = 1, efficiency = 1;
  int64_t memoryBytes = 0, gpusPerNode = 1;
  double intraNodeBandwidth = 1, interNodeBandwidth = 1, latencyS = 0, launchOverheadS = 0;

  int64_t worldSize() const { return int64_t(pipeline) * data * tensor; }
  int64_t batchSamples() const { return microbatches * microbatchSize; }
  /// Tokens of a step (every replica's batch) of `seq`-token samples. A double: the product of
  /// bounded figures may pass 2^63 (and is exact while below 2^53).
  double stepTokens(int64_t seq) const {
    return static_cast<double>(batchSamples()) * static_cast<double>(data) *
           static_cast<double>(seq);
  }
  int64_t elementBytes() const { return dtype == DType::FP32 ? 4 : 2; }
  /// Whether activations are recomputed in the backward (fully or selectively).
  bool recomputes() const { return checkpointing != Checkpointing::None; }
  /// Global rank of (pipeline rank, data-parallel replica, tensor rank): the tensor rank
  /// innermost, the other two in the rank order.
  int64_t globalRank(int64_t pipelineRank, int64_t replica, int64_t tensorRank) const {
    return (pipelineInner ? replica * pipeline + pipelineRank : pipelineRank * data + replica) *
               tensor +
           tensorRank;
  }
};

struct Plan;
/// What a reader must understand to run `plan`: Plan::features and the kFeature bits its
/// configuration and model use.
uint64_t requiredFeatures(const Plan &plan);

struct Plan {
  uint32_t formatVersion = kPlanFormatVersion;
  uint64_t features = 0;
  std::string name;
  std::string source;
  Config config;
  std::optional<Transformer> transformer;
  std::vector<Layer> layers;
  std::vector<Stage> stages;
  std::vector<Group> groups;
  std::vector<RankProgram> ranks;

  /// Whether a mixture of experts' routed experts are a segment of their own, reduced and
  /// sharded over their expert-data group (the D x T / E ranks holding the same experts)
  /// rather than over the replicas: whenever that group is not the replicas, that is with
  /// expert or tensor parallelism (each tensor rank routes its own tokens).
  bool expertsApart() const {
    return transformer && transformer->isMoe() && (config.expert > 1 || config.tensor > 1);
  }
};

/// How far the compute of one (stage, micro-batch) of a rank has come: a forward, then a
/// backward, whole or as one backward_input (I) and later one backward_weight (W) on the
/// same rank. One set of rules for the plan's semantic check, which follows a rank's
/// program, and for the backends, which follow its execution.
struct ComputeProgress {
  bool forward = false, whole = false, input = false, weight = false;

  /// Takes compute instruction `op` in: null, or why it cannot come here (and nothing
  /// changes).
  const char *take(Op op);
  /// Whether an I waits for its W (the micro-batch's weight gradients are not complete).
  bool weightPending() const { return input && !weight; }
};

/// "forward", "send", ... as in the plan dialect.
const char *opName(Op op);
/// "gpipe", "1f1b", ..., as in the job file.
const char *scheduleName(Schedule schedule);
/// "F s3 mb5", "send activation s3 mb5 -> rank 2", ...: for messages and traces.
std::string describe(const Instruction &inst);

} // namespace conduit::runtime

#endif // CONDUIT_RUNTIME_PLAN_PLAN_H
