//===- PipeAttrs.cpp - pipe enums and attributes --------------------------===//
//
// Verifiers of the configuration attributes and the helpers that print doubles and enums in
// their assembly formats.
//
//===----------------------------------------------------------------------===//

#include "dialects/pipe/PipeAttrs.h"

#include "dialects/pipe/PipeDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/Format.h"

#include <cmath>
#include <cstdlib>

using namespace mlir;
using namespace conduit::pipe;

#include "dialects/pipe/PipeEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/pipe/PipeAttrs.cpp.inc"

FailureOr<F64> conduit::pipe::parseF64(AsmParser &parser) {
  double value = 0;
  if (parser.parseFloat(value))
    return failure();
  return F64(value);
}

ParseResult conduit::pipe::parseWeightFlops(AsmParser &parser, double &value) {
  value = 0;
  if (failed(parser.parseOptionalKeyword("wgrad")))
    return success();
  return parser.parseFloat(value);
}

void conduit::pipe::printWeightFlops(AsmPrinter &printer, Operation *, double value) {
  if (value == 0)
    return;
  printer << "wgrad ";
  printF64(printer, value);
}

FailureOr<RecomputeModule> conduit::pipe::parseRecomputeModules(AsmParser &parser) {
  auto modules = static_cast<RecomputeModule>(0);
  auto one = [&]() -> ParseResult {
    std::string name;
    llvm::SMLoc loc = parser.getCurrentLocation();
    if (parser.parseString(&name))
      return failure();
    // One name per entry (the enum's own parser would take "a, b" as two).
    std::optional<RecomputeModule> module = symbolizeRecomputeModule(name);
    if (!module || name.find(',') != std::string::npos)
      return parser.emitError(loc) << "unknown recompute module \"" << name << "\"";
    modules = modules | *module;
    return success();
  };
  if (parser.parseCommaSeparatedList(AsmParser::Delimiter::Square, one))
    return failure();
  return modules;
}

void conduit::pipe::printRecomputeModules(AsmPrinter &printer, RecomputeModule modules) {
  printer << '[';
  bool first = true;
  for (uint32_t bit = 1; bit != 0 && bit <= static_cast<uint32_t>(modules); bit <<= 1)
    if (static_cast<uint32_t>(modules) & bit) {
      printer << (first ? "" : ", ") << '"'
              << stringifyRecomputeModule(static_cast<RecomputeModule>(bit)) << '"';
      first = false;
    }
  printer << ']';
}

void conduit::pipe::printF64(AsmPrinter &printer, double value) {
  // The shortest of %.15g .. %.17g that reads back as the same double.
  std::string text;
  for (int digits = 15; digits <= 17; ++digits) {
    text.clear();
    llvm::raw_string_ostream os(text);
    os << llvm::format("%.*g", digits, value);
    os.flush();
    if (std::strtod(text.c_str(), nullptr) == value)
      break;
  }
  // MLIR float literals need a decimal point ("1e-05" lexes as an integer).
  if (text.find_first_of(".ni") == std::string::npos) {
    size_t exponent = text.find_first_of("eE");
    text.insert(exponent == std::string::npos ? text.size() : exponent, ".0");
  }
  printer << text;
}

void PipeDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialects/pipe/PipeAttrs.cpp.inc"
      >();
}

namespace {
/// Emits "<name> must be <what>, got <value>" unless `ok`.
template <typename T>
LogicalResult check(function_ref<InFlightDiagnostic()> emitError, bool ok, StringRef name,
                    StringRef what, T value) {
  if (ok)
    return success();
  return emitError() << name << " must be " << what << ", got " << value;
}
} // namespace

LogicalResult
ParallelismAttr::verify(function_ref<InFlightDiagnostic()> emitError, int64_t pipeline,
                        int64_t data, int64_t stagesPerDevice, ScheduleKind schedule,
                        int64_t groupSize, int64_t microbatches, int64_t microbatchSize,
                        Sharding sharding, Checkpointing checkpointing, int64_t fsdpWindow,
                        RankOrder rankOrder, Placement placement, bool splitBackward,
                        int64_t tensor, bool sequenceParallel, int64_t expert,
                        bool tensorCommOverlap, GradientReduction gradientReduction,
                        RecomputeModule recomputeModules, int64_t maxDeferredWeightGradients) {
  if (failed(check(emitError, pipeline >= 1, "pipeline", "positive", pipeline)) ||
      failed(check(emitError, data >= 1, "data", "positive", data)) ||
      failed(check(emitError, stagesPerDevice >= 1, "stages_per_device", "positive",
                   stagesPerDevice)) ||
      failed(check(emitError, groupSize >= 1, "group_size", "positive", groupSize)) ||
      failed(check(emitError, microbatches >= 1, "microbatches", "positive", microbatches)) ||
      failed(
          check(emitError, microbatchSize >= 1, "microbatch_size", "positive", microbatchSize)) ||
      failed(check(emitError, fsdpWindow >= 1, "fsdp_window", "positive", fsdpWindow)) ||
      failed(check(emitError, tensor >= 1, "tensor", "positive", tensor)) ||
      failed(check(emitError, expert >= 1, "expert", "positive", expert)))
    return failure();
  if (gradientReduction == GradientReduction::Run && sharding != Sharding::Gradients &&
      sharding != Sharding::Full)
    return emitError() << "gradient_reduction \"run\" needs sharded gradients (sharding "
                          "\"gradients\" or \"full\"), got sharding \""
                       << stringifyEnum(sharding) << "\"";
  if (static_cast<uint32_t>(recomputeModules) == 0)
    return emitError() << "recompute_modules must name at least one module";
  if (maxDeferredWeightGradients < -1)
    return emitError() << "max_deferred_weight_gradients must be non-negative (or -1, the "
                          "schedule's own rule), got "
                       << maxDeferredWeightGradients;
  if (maxDeferredWeightGradients >= 0 && !splitBackward)
    return emitError() << "max_deferred_weight_gradients needs split backwards (split_backward "
                          "or a zero-bubble schedule)";
  return success();
}

LogicalResult ClusterAttr::verify(function_ref<InFlightDiagnostic()> emitError, StringRef preset,
                                  F64 peakFlops, F64 efficiency, F64 memoryBandwidth,
                                  int64_t memoryBytes, int64_t gpusPerNode, F64 intraNodeBandwidth,
                                  F64 interNodeBandwidth, F64 latencyS, F64 launchOverheadS,
                                  StringRef profile) {
  auto finite = [](double v) { return std::isfinite(v); };
  if (failed(check(emitError, finite(peakFlops) && peakFlops > 0, "peak_flops", "positive",
                   peakFlops)) ||
      failed(check(emitError, finite(efficiency) && efficiency > 0 && efficiency <= 1, "efficiency",
                   "in (0, 1]", efficiency)) ||
      failed(check(emitError, finite(memoryBandwidth) && memoryBandwidth > 0, "memory_bandwidth",
                   "positive", memoryBandwidth)) ||
      failed(check(emitError, memoryBytes > 0, "memory_bytes", "positive", memoryBytes)) ||
      failed(check(emitError, gpusPerNode >= 1, "gpus_per_node", "positive", gpusPerNode)) ||
      failed(check(emitError, finite(intraNodeBandwidth) && intraNodeBandwidth > 0,
                   "intra_node_bandwidth", "positive", intraNodeBandwidth)) ||
      failed(check(emitError, finite(interNodeBandwidth) && interNodeBandwidth > 0,
                   "inter_node_bandwidth", "positive", interNodeBandwidth)) ||
      failed(check(emitError, finite(latencyS) && latencyS >= 0, "latency_s", "non-negative",
                   latencyS)) ||
      failed(check(emitError, finite(launchOverheadS) && launchOverheadS >= 0, "launch_overhead_s",
                   "non-negative", launchOverheadS)))
    return failure();
  return success();
}

LogicalResult TrainingAttr::verify(function_ref<InFlightDiagnostic()> emitError, DType dtype,
                                   Optimizer optimizer, int64_t seed, F64 learningRate,
                                   DataKind data, StringRef dataPath, TokenType dataDtype,
                                   MasterWeights masterWeights, Fp8Scaling fp8Scaling,
                                   AdamMoments adamMoments, OptimizerKernels optimizerKernels) {
  if (failed(check(emitError, seed >= 0, "seed", "non-negative", seed)) ||
      failed(check(emitError, std::isfinite(learningRate) && learningRate > 0, "learning_rate",
                   "positive", learningRate)))
    return failure();
  if ((data == DataKind::Synthetic) != dataPath.empty())
    return emitError() << (dataPath.empty()
                               ? "data \"" + stringifyEnum(data).str() + "\" needs a data_path"
                               : std::string("synthetic data takes no data_path"));
  if (masterWeights == MasterWeights::Parameters && dtype == DType::FP32)
    return emitError() << "master_weights \"parameters\" needs a 16-bit or fp8 dtype";
  if (fp8Scaling == Fp8Scaling::Current && dtype != DType::FP8)
    return emitError() << "fp8_scaling \"current\" needs dtype \"fp8\"";
  if (adamMoments == AdamMoments::BF16 && optimizer != Optimizer::Adam)
    return emitError() << "adam_moments \"bf16\" needs optimizer \"adam\"";
  return success();
}

int64_t TrainingAttr::getElementBytes() const { return getDtype() == DType::FP32 ? 4 : 2; }

int64_t TrainingAttr::getStoredParameterBytes() const {
  return getMasterWeights() == MasterWeights::Parameters ? 4 : getElementBytes();
}

int64_t TrainingAttr::getMomentBytes() const {
  return getAdamMoments() == AdamMoments::BF16 ? 2 : 4;
}

LogicalResult TransformerAttr::verify(
    function_ref<InFlightDiagnostic()> emitError, int64_t numLayers, int64_t hiddenSize,
    int64_t numHeads, int64_t numKvHeads, int64_t ffnHiddenSize, int64_t seqLength,
    int64_t vocabSize, MlpKind mlp, NormKind norm, PositionKind position, bool tieEmbeddings,
    BiasKind bias, F64 ropeTheta, F64 normEps, AttentionKind attention, ElementwiseKind elementwise,
    int64_t headDim, bool qkNorm, int64_t mtpLayers, F64 mtpLossCoefficient,
    LatentAttentionAttr latentAttention, MoeAttr moe, RopeScalingAttr ropeScaling) {
  if (failed(check(emitError, numLayers >= 1, "num_layers", "positive", numLayers)) ||
      failed(check(emitError, hiddenSize >= 1, "hidden_size", "positive", hiddenSize)) ||
      failed(check(emitError, numHeads >= 1, "num_heads", "positive", numHeads)) ||
      failed(check(emitError, numKvHeads >= 1, "num_kv_heads", "positive", numKvHeads)) ||
      failed(check(emitError, ffnHiddenSize >= 1, "ffn_hidden_size", "positive", ffnHiddenSize)) ||
      failed(check(emitError, seqLength >= 1, "seq_length", "positive", seqLength)) ||
      failed(check(emitError, vocabSize >= 1, "vocab_size", "positive", vocabSize)) ||
      failed(check(emitError, std::isfinite(ropeTheta) && ropeTheta > 1, "rope_theta", "above 1",
                   ropeTheta)) ||
      failed(check(emitError, std::isfinite(normEps) && normEps > 0 && normEps < 1, "norm_eps",
                   "between 0 and 1", normEps)) ||
      failed(check(emitError, headDim >= 0, "head_dim", "non-negative", headDim)) ||
      failed(check(emitError, mtpLayers >= 0, "mtp_layers", "non-negative", mtpLayers)) ||
      failed(check(emitError, std::isfinite(mtpLossCoefficient) && mtpLossCoefficient > 0,
                   "mtp_loss_coefficient", "positive", mtpLossCoefficient)))
    return failure();
  if (ropeScaling && position != PositionKind::Rotary)
    return emitError() << "rope_scaling extends rotary positions, and the positions are "
                       << stringifyEnum(position);
  if (latentAttention && headDim != 0)
    return emitError() << "head_dim is set with latent_attention, whose head widths are its own";
  if (moe && moe.getDenseLayers() > numLayers)
    return emitError() << "moe's dense_layers " << moe.getDenseLayers() << " exceed num_layers "
                       << numLayers;
  if (hiddenSize % numHeads != 0)
    return emitError() << "hidden_size " << hiddenSize << " is not divisible by num_heads "
                       << numHeads;
  if (numHeads % numKvHeads != 0)
    return emitError() << "num_heads " << numHeads << " is not divisible by num_kv_heads "
                       << numKvHeads;
  return success();
}

LogicalResult MoeAttr::verify(function_ref<InFlightDiagnostic()> emitError, int64_t numExperts,
                              int64_t topK, int64_t expertFfnHiddenSize, RouterKind router,
                              bool normalizeTopK, F64 auxLossCoefficient, int64_t sharedExperts,
                              int64_t sharedFfnHiddenSize, int64_t denseLayers, F64 capacityFactor,
                              F64 imbalance, int64_t routerGroups, int64_t routerGroupTopK,
                              DispatchKind dispatch, bool fp8Dispatch, ExpertKernels,
                              F64 biasUpdateRate, F64 routedScalingFactor, bool sharedExpertGate,
                              F64 zLossCoefficient, DropPolicy dropPolicy) {
  auto finite = [](double v) { return std::isfinite(v); };
  if (failed(check(emitError, numExperts >= 1, "num_experts", "positive", numExperts)) ||
      failed(check(emitError, topK >= 1 && topK <= numExperts, "top_k", "between 1 and num_experts",
                   topK)) ||
      failed(check(emitError, expertFfnHiddenSize >= 1, "expert_ffn_hidden_size", "positive",
                   expertFfnHiddenSize)) ||
      failed(check(emitError, finite(auxLossCoefficient) && auxLossCoefficient >= 0,
                   "aux_loss_coefficient", "non-negative", auxLossCoefficient)) ||
      failed(check(emitError, finite(zLossCoefficient) && zLossCoefficient >= 0,
                   "z_loss_coefficient", "non-negative", zLossCoefficient)) ||
      failed(
          check(emitError, sharedExperts >= 0, "shared_experts", "non-negative", sharedExperts)) ||
      failed(check(emitError, sharedFfnHiddenSize >= 0, "shared_ffn_hidden_size", "non-negative",
                   sharedFfnHiddenSize)) ||
      failed(check(emitError, denseLayers >= 0, "dense_layers", "non-negative", denseLayers)) ||
      failed(check(emitError, finite(capacityFactor) && capacityFactor >= 0, "capacity_factor",
                   "non-negative (0: dropless)", capacityFactor)) ||
      failed(check(emitError, finite(imbalance) && imbalance >= 1, "imbalance", "at least 1",
                   imbalance)) ||
      failed(check(emitError, routerGroups >= 1 && numExperts % routerGroups == 0, "router_groups",
                   "a divisor of num_experts", routerGroups)) ||
      failed(check(emitError, routerGroupTopK >= 1 && routerGroupTopK <= routerGroups,
                   "router_group_top_k", "between 1 and router_groups", routerGroupTopK)) ||
      failed(check(emitError, topK <= routerGroupTopK * (numExperts / routerGroups), "top_k",
                   "at most the experts of router_group_top_k groups", topK)) ||
      failed(check(emitError, finite(biasUpdateRate) && biasUpdateRate >= 0, "bias_update_rate",
                   "non-negative", biasUpdateRate)) ||
      failed(check(emitError, finite(routedScalingFactor) && routedScalingFactor > 0,
                   "routed_scaling_factor", "positive", routedScalingFactor)))
    return failure();
  if (biasUpdateRate > 0 && router != RouterKind::Sigmoid)
    return emitError() << "bias_update_rate moves the sigmoid router's bias, and the router is "
                          "softmax";
  if ((sharedExperts > 0) != (sharedFfnHiddenSize > 0))
    return emitError() << "shared_experts " << sharedExperts << " and shared_ffn_hidden_size "
                       << sharedFfnHiddenSize << ": both are 0 or both positive";
  if (sharedExpertGate && sharedExperts == 0)
    return emitError() << "shared_expert_gate gates the shared experts, and there are none";
  if (dropPolicy != DropPolicy::Position && !(capacityFactor > 0))
    return emitError() << "drop_policy says which assignments a capacity drops, and "
                          "capacity_factor is 0 (dropless)";
  return success();
}

LogicalResult RopeScalingAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                      RopeType ropeType, F64 factor,
                                      int64_t originalMaxPositionEmbeddings, F64 lowFreqFactor,
                                      F64 highFreqFactor, F64 betaFast, F64 betaSlow, bool truncate,
                                      F64 attentionFactor, F64 mscaleAllDim) {
  auto finite = [](double v) { return std::isfinite(v); };
  // The types that read the original context (llama3's and yarn's bands, dynamic's threshold).
  const bool original =
      ropeType == RopeType::Llama3 || ropeType == RopeType::Yarn || ropeType == RopeType::Dynamic;
  if (failed(check(emitError, ropeType != RopeType::Default, "rope_type",
                   "an extension (no rope_scaling: none)", stringifyEnum(ropeType))) ||
      failed(check(emitError, finite(factor) && factor >= 1, "factor", "at least 1", factor)) ||
      failed(check(emitError, !original || originalMaxPositionEmbeddings >= 1,
                   "original_max_position_embeddings", "positive for llama3, yarn and dynamic",
                   originalMaxPositionEmbeddings)) ||
      failed(check(emitError, finite(lowFreqFactor) && lowFreqFactor > 0, "low_freq_factor",
                   "positive", lowFreqFactor)) ||
      failed(check(emitError, finite(highFreqFactor) && highFreqFactor > lowFreqFactor,
                   "high_freq_factor", "above low_freq_factor", highFreqFactor)) ||
      failed(
          check(emitError, finite(betaFast) && betaFast > 0, "beta_fast", "positive", betaFast)) ||
      failed(
          check(emitError, finite(betaSlow) && betaSlow > 0, "beta_slow", "positive", betaSlow)) ||
      failed(check(emitError, finite(attentionFactor) && attentionFactor > 0, "attention_factor",
                   "positive", attentionFactor)) ||
      failed(check(emitError, finite(mscaleAllDim) && mscaleAllDim >= 0, "mscale_all_dim",
                   "non-negative", mscaleAllDim)))
    return failure();
  // What another type reads stays at its default (and is not printed).
  const bool llama3 = ropeType == RopeType::Llama3, yarn = ropeType == RopeType::Yarn;
  const std::pair<StringRef, bool> unread[] = {
      {"original_max_position_embeddings", !original && originalMaxPositionEmbeddings != 0},
      {"low_freq_factor", !llama3 && lowFreqFactor != 1},
      {"high_freq_factor", !llama3 && highFreqFactor != 4},
      {"beta_fast", !yarn && betaFast != 32},
      {"beta_slow", !yarn && betaSlow != 1},
      {"truncate", !yarn && !truncate},
      {"attention_factor", !yarn && attentionFactor != 1},
      {"mscale_all_dim", !yarn && mscaleAllDim != 0}};
  for (const auto &[name, set] : unread)
    if (set)
      return emitError() << name << " is set and rope_type " << stringifyEnum(ropeType)
                         << " does not read it";
  return success();
}

LogicalResult LatentAttentionAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                          int64_t qLoraRank, int64_t kvLoraRank,
                                          int64_t qkNopeHeadDim, int64_t qkRopeHeadDim,
                                          int64_t vHeadDim, bool ropeInterleave) {
  if (failed(check(emitError, qLoraRank >= 0, "q_lora_rank", "non-negative", qLoraRank)) ||
      failed(check(emitError, kvLoraRank >= 1, "kv_lora_rank", "positive", kvLoraRank)) ||
      failed(check(emitError, qkNopeHeadDim >= 0, "qk_nope_head_dim", "non-negative",
                   qkNopeHeadDim)) ||
      failed(check(emitError, qkRopeHeadDim >= 0, "qk_rope_head_dim", "non-negative",
                   qkRopeHeadDim)) ||
      failed(check(emitError, qkNopeHeadDim + qkRopeHeadDim >= 1,
                   "qk_nope_head_dim + qk_rope_head_dim", "positive",
                   qkNopeHeadDim + qkRopeHeadDim)) ||
      failed(check(emitError, vHeadDim >= 1, "v_head_dim", "positive", vHeadDim)))
    return failure();
  return success();
}
