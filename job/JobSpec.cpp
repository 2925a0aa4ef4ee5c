//===- JobSpec.cpp - the spellings of the job model's enums ---------------===//
//
// Each list is in its enum's order; a value added to an enum without a spelling here fails
// the static_asserts below. The schedules' spellings are the plan's (runtime::scheduleName),
// which the plan file and its JSON dump print.
//
//===----------------------------------------------------------------------===//

#include "job/JobSpec.h"

#include <array>

using namespace conduit;

namespace {

template <typename Enum, size_t N>
constexpr bool endsAt(const std::array<std::string_view, N> &, Enum last) {
  return static_cast<size_t>(last) + 1 == N;
}

constexpr std::array<std::string_view, 4> kLayerKinds = {"embedding", "block", "head", "custom"};
constexpr std::array<std::string_view, 4> kShardings = {"none", "optimizer", "gradients", "full"};
constexpr std::array<std::string_view, 2> kGradientReductions = {"step", "run"};
constexpr std::array<std::string_view, 4> kCheckpointings = {"none", "full", "selective", "blocks"};
constexpr std::array<std::string_view, 4> kDTypes = {"bf16", "fp16", "fp32", "fp8"};
constexpr std::array<std::string_view, 2> kOptimizers = {"adam", "sgd"};
constexpr std::array<std::string_view, 2> kAdamMoments = {"fp32", "bf16"};
constexpr std::array<std::string_view, 3> kDataKinds = {"synthetic", "tokens", "text"};
constexpr std::array<std::string_view, 2> kPlacements = {"loop", "v"};
constexpr std::array<std::string_view, 2> kRankOrders = {"data-inner", "pipeline-inner"};
constexpr std::array<std::string_view, 2> kTokenTypes = {"uint16", "uint32"};
constexpr std::array<std::string_view, 2> kMlps = {"gelu", "swiglu"};
constexpr std::array<std::string_view, 2> kNorms = {"layernorm", "rmsnorm"};
constexpr std::array<std::string_view, 2> kPositions = {"learned", "rotary"};
constexpr std::array<std::string_view, 3> kBiases = {"all", "qkv", "none"};
constexpr std::array<std::string_view, 4> kAttentions = {"flash", "eager", "flash2",
                                                         "flash_triton"};
constexpr std::array<std::string_view, 3> kElementwiseKinds = {"fused", "eager",
                                                               "eager_fused_norm"};
constexpr std::array<std::string_view, 2> kRouters = {"softmax", "sigmoid"};
constexpr std::array<std::string_view, 2> kDispatches = {"per_expert", "per_node"};
constexpr std::array<std::string_view, 2> kDropPolicies = {"position", "probs"};
constexpr std::array<std::string_view, 2> kExpertKernels = {"grouped", "megatron"};
constexpr std::array<std::string_view, 2> kFp8SavedInputs = {"fp8", "bf16"};
constexpr std::array<std::string_view, 2> kMasterWeights = {"separate", "parameters"};
constexpr std::array<std::string_view, 2> kFp8Scalings = {"delayed", "current"};
constexpr std::array<std::string_view, 3> kOptimizerKernels = {"fused", "foreach", "per_tensor"};

static_assert(endsAt(kLayerKinds, runtime::LayerKind::Custom));
static_assert(endsAt(kShardings, runtime::Sharding::Full));
static_assert(endsAt(kGradientReductions, runtime::GradientReduction::Run));
static_assert(endsAt(kCheckpointings, runtime::Checkpointing::Blocks));
static_assert(endsAt(kDTypes, runtime::DType::FP8));
static_assert(endsAt(kOptimizers, runtime::Optimizer::SGD));
static_assert(endsAt(kAdamMoments, runtime::AdamMoments::BF16));
static_assert(endsAt(kDataKinds, runtime::DataKind::Text));
static_assert(endsAt(kPlacements, Placement::V));
static_assert(endsAt(kRankOrders, RankOrder::PipelineInner));
static_assert(endsAt(kTokenTypes, TokenType::UInt32));
static_assert(endsAt(kMlps, MlpKind::SwiGLU));
static_assert(endsAt(kNorms, NormKind::RMSNorm));
static_assert(endsAt(kPositions, PositionKind::Rotary));
static_assert(endsAt(kBiases, BiasKind::None));
static_assert(endsAt(kAttentions, AttentionKind::FlashTriton));
static_assert(endsAt(kElementwiseKinds, ElementwiseKind::EagerFusedNorm));
static_assert(endsAt(kRouters, RouterKind::Sigmoid));
static_assert(endsAt(runtime::kRopeTypeNames, runtime::RopeType::Dynamic));
static_assert(endsAt(kDispatches, DispatchKind::PerNode));
static_assert(endsAt(kDropPolicies, DropPolicy::Probs));
static_assert(endsAt(kExpertKernels, ExpertKernels::Megatron));
static_assert(endsAt(kFp8SavedInputs, Fp8SavedInputs::BF16));
static_assert(endsAt(kMasterWeights, MasterWeights::Parameters));
static_assert(endsAt(kFp8Scalings, Fp8Scaling::Current));
static_assert(endsAt(kOptimizerKernels, OptimizerKernels::PerTensor));

} // namespace

namespace conduit {

template <> absl::Span<const std::string_view> enumNames<runtime::Schedule>() {
  static const std::array<std::string_view, runtime::kNumSchedules> names = [] {
    std::array<std::string_view, runtime::kNumSchedules> out;
    for (size_t i = 0; i < out.size(); ++i)
      out[i] = runtime::scheduleName(static_cast<runtime::Schedule>(i));
    return out;
  }();
  return names;
}

template <> absl::Span<const std::string_view> enumNames<runtime::LayerKind>() {
  return kLayerKinds;
}
template <> absl::Span<const std::string_view> enumNames<runtime::Sharding>() { return kShardings; }
template <> absl::Span<const std::string_view> enumNames<runtime::GradientReduction>() {
  return kGradientReductions;
}
template <> absl::Span<const std::string_view> enumNames<runtime::Checkpointing>() {
  return kCheckpointings;
}
template <> absl::Span<const std::string_view> enumNames<runtime::DType>() { return kDTypes; }
template <> absl::Span<const std::string_view> enumNames<runtime::Optimizer>() {
  return kOptimizers;
}
template <> absl::Span<const std::string_view> enumNames<runtime::AdamMoments>() {
  return kAdamMoments;
}
template <> absl::Span<const std::string_view> enumNames<runtime::DataKind>() { return kDataKinds; }
template <> absl::Span<const std::string_view> enumNames<Placement>() { return kPlacements; }
template <> absl::Span<const std::string_view> enumNames<RankOrder>() { return kRankOrders; }
template <> absl::Span<const std::string_view> enumNames<TokenType>() { return kTokenTypes; }
template <> absl::Span<const std::string_view> enumNames<MlpKind>() { return kMlps; }
template <> absl::Span<const std::string_view> enumNames<NormKind>() { return kNorms; }
template <> absl::Span<const std::string_view> enumNames<PositionKind>() { return kPositions; }
template <> absl::Span<const std::string_view> enumNames<BiasKind>() { return kBiases; }
template <> absl::Span<const std::string_view> enumNames<AttentionKind>() { return kAttentions; }
template <> absl::Span<const std::string_view> enumNames<ElementwiseKind>() {
  return kElementwiseKinds;
}
template <> absl::Span<const std::string_view> enumNames<RouterKind>() { return kRouters; }
template <> absl::Span<const std::string_view> enumNames<runtime::RopeType>() {
  return runtime::kRopeTypeNames;
}
template <> absl::Span<const std::string_view> enumNames<DispatchKind>() { return kDispatches; }
template <> absl::Span<const std::string_view> enumNames<DropPolicy>() { return kDropPolicies; }
template <> absl::Span<const std::string_view> enumNames<ExpertKernels>() { return kExpertKernels; }
template <> absl::Span<const std::string_view> enumNames<Fp8SavedInputs>() {
  return kFp8SavedInputs;
}
template <> absl::Span<const std::string_view> enumNames<MasterWeights>() { return kMasterWeights; }
template <> absl::Span<const std::string_view> enumNames<Fp8Scaling>() { return kFp8Scalings; }
template <> absl::Span<const std::string_view> enumNames<OptimizerKernels>() {
  return kOptimizerKernels;
}

} // namespace conduit
