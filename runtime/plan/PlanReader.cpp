//===- PlanReader.cpp - reading plan files --------------------------------===//
//
// The structure of a plan file, checked before anything is built from it: the size, the
// identifier, FlatBuffers' verifier, the format version and feature bits, the required tables,
// bounds on every count and on what the reader copies; then the conversion to the Plan data
// model, refusing unknown enum values, and last the semantic check (PlanChecks.h).
//
//===----------------------------------------------------------------------===//

#include "runtime/plan/PlanFile.h"

#include "runtime/plan/Limits.h"
#include "runtime/plan/PlanChecks.h"
#include "runtime/plan/plan_generated.h"

#include "absl/strings/str_cat.h"

#include <cmath>
#include <cstring>
#include <fstream>
#include <string_view>
#include <utility>

namespace conduit::runtime {

namespace fb = conduit::planfile;

namespace {

absl::Status corrupt(const std::string &what) {
  return absl::DataLossError(absl::StrCat("corrupt plan file: ", what));
}

/// What the reader copies out of the file. A writer stores every vector and string once; a
/// file whose tables point at the same data many times (which FlatBuffers' structure allows)
/// would make the reader copy far more than the file holds, so the copies may not add up to
/// more than the file's size.
class CopyBudget {
public:
  explicit CopyBudget(size_t fileBytes) : left(fileBytes) {}
  bool take(size_t bytes) {
    if (bytes > left)
      return false;
    left -= bytes;
    return true;
  }
  template <typename T> bool take(const flatbuffers::Vector<T> *v) {
    return !v || take(size_t(v->size()) * sizeof(T));
  }
  bool take(const flatbuffers::String *s) { return !s || take(size_t(s->size())); }

private:
  size_t left;
};

/// The elements of `v`, copied byte-wise: the verifier checks a vector's length prefix to be
/// 4-byte aligned, not its 8-byte elements, which a hostile file may misalign. (Plan files are
/// little-endian, as every platform the runtime builds for.)
template <typename T> std::vector<T> toVector(const flatbuffers::Vector<T> *v) {
  static_assert(FLATBUFFERS_LITTLEENDIAN, "plan files are little-endian");
  std::vector<T> out(v ? v->size() : 0);
  if (!out.empty())
    std::memcpy(out.data(), v->Data(), out.size() * sizeof(T));
  return out;
}

} // namespace

namespace {

absl::Status invalid(const std::string &what) {
  return absl::InvalidArgumentError(absl::StrCat("invalid plan: ", what));
}

/// `field` (its name in plan.fbs) lies in [least, most].
absl::Status inRange(const std::string &field, int64_t value, int64_t least, int64_t most) {
  if (value >= least && value <= most)
    return absl::OkStatus();
  return invalid(
      absl::StrCat(field, " is ", value, "; it must lie between ", least, " and ", most));
}
absl::Status inRange(const std::string &field, double value, double least, double most) {
  if (std::isfinite(value) && value >= least && value <= most)
    return absl::OkStatus();
  return invalid(
      absl::StrCat(field, " is ", value, "; it must lie between ", least, " and ", most));
}

/// The attention variants: an explicit head width, multi-head latent attention.
absl::Status checkAttentionFields(const Transformer &t) {
  using namespace limits;
  CONDUIT_RETURN_IF_ERROR(inRange("transformer.head_dim", t.headDim, 0, kMaxHidden));
  const bool rotary = t.position == 1;
  if (rotary && t.headDim % 2 != 0)
    return invalid(absl::StrCat("transformer.head_dim is ", t.headDim,
                                "; rotary positions rotate pairs of a head's dimensions, so it "
                                "must be even"));
  CONDUIT_RETURN_IF_ERROR(inRange("transformer.q_lora_rank", t.qLoraRank, 0, kMaxHidden));
  CONDUIT_RETURN_IF_ERROR(inRange("transformer.kv_lora_rank", t.kvLoraRank, 0, kMaxHidden));
  CONDUIT_RETURN_IF_ERROR(inRange("transformer.qk_nope_head_dim", t.qkNopeHeadDim, 0, kMaxHidden));
  CONDUIT_RETURN_IF_ERROR(inRange("transformer.qk_rope_head_dim", t.qkRopeHeadDim, 0, kMaxHidden));
  CONDUIT_RETURN_IF_ERROR(inRange("transformer.v_head_dim", t.vHeadDim, 0, kMaxHidden));
  if (!t.usesLatentAttention()) {
    const std::pair<const char *, int64_t> latent[] = {
        {"transformer.q_lora_rank", t.qLoraRank},
        {"transformer.qk_nope_head_dim", t.qkNopeHeadDim},
        {"transformer.qk_rope_head_dim", t.qkRopeHeadDim},
        {"transformer.v_head_dim", t.vHeadDim},
        {"transformer.rope_interleave", t.ropeInterleave}};
    for (auto [field, value] : latent)
      if (value != 0)
        return invalid(absl::StrCat(field, " is ", value,
                                    " without latent attention (transformer.kv_lora_rank 0)"));
    return absl::OkStatus();
  }
  if (t.headDim != 0)
    return invalid("transformer.head_dim is set with latent attention, whose head widths are "
                   "transformer.qk_nope_head_dim, qk_rope_head_dim and v_head_dim");
  if (t.qkNopeHeadDim + t.qkRopeHeadDim < 1 || t.vHeadDim < 1)
    return invalid("latent attention needs transformer.qk_nope_head_dim + qk_rope_head_dim and "
                   "transformer.v_head_dim above 0");
  if (rotary && t.qkRopeHeadDim % 2 != 0)
    return invalid(
        absl::StrCat("transformer.qk_rope_head_dim is ", t.qkRopeHeadDim,
                     "; rotary positions rotate pairs of dimensions, so it must be even"));
  return absl::OkStatus();
}

/// The rotary context extension: what its type reads, in the ranges the job reader allows,
/// and every field its type does not read at its default; none of it without rotary positions.
absl::Status checkRotaryFields(const Transformer &t) {
  const RopeScaling &r = t.ropeScaling, none;
  // The types that read the original context (llama3's and yarn's bands, dynamic's threshold).
  const bool original =
      r.type == RopeType::Llama3 || r.type == RopeType::Yarn || r.type == RopeType::Dynamic;
  const struct {
    const char *field;
    bool read, atDefault;
  } unread[] = {
      {"rope_factor", r.scaled(), r.factor == none.factor},
      {"rope_original_positions", original, r.originalPositions == none.originalPositions},
      {"rope_low_freq_factor", r.type == RopeType::Llama3, r.lowFreqFactor == none.lowFreqFactor},
      {"rope_high_freq_factor", r.type == RopeType::Llama3,
       r.highFreqFactor == none.highFreqFactor},
      {"rope_beta_fast", r.type == RopeType::Yarn, r.betaFast == none.betaFast},
      {"rope_beta_slow", r.type == RopeType::Yarn, r.betaSlow == none.betaSlow},
      {"rope_no_truncate", r.type == RopeType::Yarn, r.truncate == none.truncate},
      {"rope_attention_factor", r.type == RopeType::Yarn,
       r.attentionFactor == none.attentionFactor},
      {"rope_mscale_all_dim", r.type == RopeType::Yarn, r.mscaleAllDim == none.mscaleAllDim}};
  for (const auto &u : unread)
    if (!u.read && !u.atDefault)
      return invalid(absl::StrCat("transformer.", u.field, " is set and transformer.rope_type ",
                                  static_cast<int>(r.type), " does not read it"));
  if (!r.scaled())
    return absl::OkStatus();
  if (t.position != 1)
    return invalid("transformer.rope_type is set and the positions are learned, not rotary");
  CONDUIT_RETURN_IF_ERROR(inRange("transformer.rope_factor", r.factor, 1.0, 1e6));
  CONDUIT_RETURN_IF_ERROR(
      inRange("transformer.rope_attention_factor", r.attentionFactor, 1e-3, 1e3));
  CONDUIT_RETURN_IF_ERROR(inRange("transformer.rope_mscale_all_dim", r.mscaleAllDim, 0.0, 1e3));
  if (r.type == RopeType::Linear)
    return absl::OkStatus();
  CONDUIT_RETURN_IF_ERROR(inRange("transformer.rope_original_positions", r.originalPositions, 1,
                                  limits::kMaxSeqLength));
  if (r.type == RopeType::Llama3) {
    CONDUIT_RETURN_IF_ERROR(
        inRange("transformer.rope_low_freq_factor", r.lowFreqFactor, 1e-6, 1e6));
    CONDUIT_RETURN_IF_ERROR(
        inRange("transformer.rope_high_freq_factor", r.highFreqFactor, 1e-6, 1e6));
    if (!(r.highFreqFactor > r.lowFreqFactor))
      return invalid(absl::StrCat("transformer.rope_high_freq_factor is ", r.highFreqFactor,
                                  "; it must exceed transformer.rope_low_freq_factor (",
                                  r.lowFreqFactor, ")"));
    return absl::OkStatus();
  }
  CONDUIT_RETURN_IF_ERROR(inRange("transformer.rope_beta_fast", r.betaFast, 1e-6, 1e6));
  CONDUIT_RETURN_IF_ERROR(inRange("transformer.rope_beta_slow", r.betaSlow, 1e-6, 1e6));
  return absl::OkStatus();
}

/// The mixture of experts and the expert-parallel degree.
absl::Status checkExpertFields(const Plan &plan) {
  using namespace limits;
  const Config &c = plan.config;
  const std::optional<Transformer> &t = plan.transformer;
  const bool moe = t && t->isMoe();
  CONDUIT_RETURN_IF_ERROR(inRange("config.expert", c.expert, 1, kMaxWorld));
  if (!moe && c.expert != 1)
    return invalid(absl::StrCat("config.expert is ", c.expert,
                                "; expert parallelism needs a mixture of experts "
                                "(transformer.num_experts above 0)"));
  for (const Layer &l : plan.layers)
    if (l.expertParams < 0 || l.expertParams > l.params || (!moe && l.expertParams != 0))
      return invalid(absl::StrCat("layer '", l.name, "' has expert_params ", l.expertParams,
                                  moe ? absl::StrCat(" of its ", l.params, " params")
                                      : std::string(" and the plan has no mixture of experts")));
  if (!t)
    return absl::OkStatus();
  CONDUIT_RETURN_IF_ERROR(inRange("transformer.num_experts", t->numExperts, 0, kMaxExperts));
  if (!moe) {
    const std::pair<const char *, double> fields[] = {
        {"transformer.top_k", double(t->topK)},
        {"transformer.expert_ffn_hidden_size", double(t->expertFfnHiddenSize)},
        {"transformer.router", double(t->router)},
        {"transformer.normalize_top_k", t->normalizeTopK ? 1.0 : 0.0},
        {"transformer.aux_loss_coefficient", t->auxLossCoefficient},
        {"transformer.z_loss_coefficient", t->zLossCoefficient},
        {"transformer.shared_experts", double(t->sharedExperts)},
        {"transformer.shared_ffn_hidden_size", double(t->sharedFfnHiddenSize)},
        {"transformer.shared_expert_gate", t->sharedExpertGate ? 1.0 : 0.0},
        {"transformer.dense_layers", double(t->denseLayers)},
        {"transformer.capacity_factor", t->capacityFactor},
        {"transformer.dispatch", double(t->dispatch)},
        {"transformer.fp8_dispatch", t->fp8Dispatch ? 1.0 : 0.0},
        {"transformer.bias_update_rate", t->biasUpdateRate},
        {"transformer.drop_by_weight", t->dropByWeight ? 1.0 : 0.0}};
    for (auto [field, value] : fields)
      if (value != 0)
        return invalid(
            absl::StrCat(field, " is ", value, " without experts (transformer.num_experts 0)"));
    const std::pair<const char *, double> ones[] = {
        {"transformer.imbalance", t->imbalance},
        {"transformer.router_groups", double(t->routerGroups)},
        {"transformer.router_group_top_k", double(t->routerGroupTopK)},
        {"transformer.routed_scaling_factor", t->routedScalingFactor}};
    for (auto [field, value] : ones)
      if (value != 1)
        return invalid(absl::StrCat(field, " is ", value,
                                    " without experts (transformer.num_experts 0); it must be 1"));
    return absl::OkStatus();
  }
  CONDUIT_RETURN_IF_ERROR(inRange("transformer.top_k", t->topK, 1, t->numExperts));
  CONDUIT_RETURN_IF_ERROR(
      inRange("transformer.expert_ffn_hidden_size", t->expertFfnHiddenSize, 1, kMaxFfn));
  CONDUIT_RETURN_IF_ERROR(
      inRange("transformer.aux_loss_coefficient", t->auxLossCoefficient, 0.0, 1e3));
  CONDUIT_RETURN_IF_ERROR(inRange("transformer.z_loss_coefficient", t->zLossCoefficient, 0.0, 1e3));
  CONDUIT_RETURN_IF_ERROR(inRange("transformer.shared_experts", t->sharedExperts, 0, kMaxExperts));
  CONDUIT_RETURN_IF_ERROR(
      inRange("transformer.shared_ffn_hidden_size", t->sharedFfnHiddenSize, 0, kMaxFfn));
  if ((t->sharedExperts > 0) != (t->sharedFfnHiddenSize > 0))
    return invalid(absl::StrCat("transformer.shared_experts is ", t->sharedExperts,
                                " and transformer.shared_ffn_hidden_size ", t->sharedFfnHiddenSize,
                                "; both are 0 or both above 0"));
  if (t->sharedExpertGate && t->sharedExperts == 0)
    return invalid("transformer.shared_expert_gate is true and there are no shared experts "
                   "(transformer.shared_experts 0)");
  CONDUIT_RETURN_IF_ERROR(inRange("transformer.dense_layers", t->denseLayers, 0, t->numLayers));
  const double experts = static_cast<double>(t->numExperts);
  CONDUIT_RETURN_IF_ERROR(inRange("transformer.capacity_factor", t->capacityFactor, 0.0, experts));
  if (t->dropByWeight && t->capacityFactor == 0)
    return invalid("transformer.drop_by_weight says which assignments a capacity drops, and "
                   "transformer.capacity_factor is 0 (dropless)");
  CONDUIT_RETURN_IF_ERROR(inRange("transformer.imbalance", t->imbalance, 1.0, experts));
  CONDUIT_RETURN_IF_ERROR(inRange("transformer.router_groups", t->routerGroups, 1, t->numExperts));
  CONDUIT_RETURN_IF_ERROR(
      inRange("transformer.router_group_top_k", t->routerGroupTopK, 1, t->routerGroups));
  CONDUIT_RETURN_IF_ERROR(inRange("transformer.bias_update_rate", t->biasUpdateRate, 0.0, 1.0));
  if (!(t->routedScalingFactor > 0))
    return invalid(absl::StrCat("transformer.routed_scaling_factor is ", t->routedScalingFactor,
                                "; it must be above 0"));
  CONDUIT_RETURN_IF_ERROR(
      inRange("transformer.routed_scaling_factor", t->routedScalingFactor, 0.0, 1e3));
  if (t->balancesBias() && t->router != 1)
    return invalid(absl::StrCat("transformer.bias_update_rate is ", t->biasUpdateRate,
                                " and the router (softmax) has no bias"));
  if (t->numExperts % t->routerGroups != 0)
    return invalid(absl::StrCat("transformer.router_groups ", t->routerGroups,
                                " does not divide transformer.num_experts ", t->numExperts));
  if (t->topK > t->routerGroupTopK * (t->numExperts / t->routerGroups))
    return invalid(absl::StrCat("transformer.top_k ", t->topK, " is more than the ",
                                t->routerGroupTopK * (t->numExperts / t->routerGroups),
                                " experts of transformer.router_group_top_k groups"));
  if (t->fp8Dispatch && c.dtype != DType::FP8)
    return invalid("transformer.fp8_dispatch needs config.dtype fp8");
  const int64_t folded = int64_t(c.data) * c.tensor;
  if (folded % c.expert != 0 || t->numExperts % c.expert != 0)
    return invalid(absl::StrCat("config.expert is ", c.expert,
                                "; it must divide config.data x config.tensor (", folded,
                                ") and transformer.num_experts (", t->numExperts, ")"));
  // The blocks from dense_layers on, and only they, hold routed experts.
  int64_t block = 0;
  for (const Layer &l : plan.layers) {
    if (l.kind != LayerKind::Block)
      continue;
    if ((l.expertParams > 0) != t->blockHasExperts(block))
      return invalid(
          absl::StrCat("layer '", l.name, "' has expert_params ", l.expertParams,
                       "; with transformer.dense_layers ", t->denseLayers, " block ", block,
                       t->blockHasExperts(block) ? " has experts" : " keeps a dense MLP"));
    ++block;
  }
  return absl::OkStatus();
}

/// The multi-token prediction modules and their losses' weight, which they must have.
absl::Status checkMtpFields(const Transformer &t) {
  CONDUIT_RETURN_IF_ERROR(inRange("transformer.mtp_layers", t.mtpLayers, 0, limits::kMaxMtpLayers));
  if (t.mtpLayers == 0) {
    if (t.mtpLossCoefficient != 0)
      return invalid(absl::StrCat("transformer.mtp_loss_coefficient is ", t.mtpLossCoefficient,
                                  " without multi-token prediction (transformer.mtp_layers 0)"));
    return absl::OkStatus();
  }
  if (t.mtpLossCoefficient == 0)
    return absl::FailedPreconditionError(
        "transformer.mtp_layers is above 0 and transformer.mtp_loss_coefficient is 0 (a plan "
        "from an older conduit-compile). Recompile the job with a matching conduit-compile.");
  if (!(std::isfinite(t.mtpLossCoefficient) && t.mtpLossCoefficient > 0 &&
        t.mtpLossCoefficient <= 1e3))
    return invalid(absl::StrCat("transformer.mtp_loss_coefficient is ", t.mtpLossCoefficient,
                                "; it must lie above 0 and at most 1000"));
  return absl::OkStatus();
}

} // namespace

absl::Status checkModelFields(const Plan &plan) {
  if (plan.transformer) {
    CONDUIT_RETURN_IF_ERROR(checkAttentionFields(*plan.transformer));
    CONDUIT_RETURN_IF_ERROR(checkRotaryFields(*plan.transformer));
    CONDUIT_RETURN_IF_ERROR(checkMtpFields(*plan.transformer));
  }
  return checkExpertFields(plan);
}

absl::StatusOr<Plan> readPlan(const void *data, size_t size) {
  if (size > kMaxPlanFileBytes)
    return absl::InvalidArgumentError(
        absl::StrCat("plan files are limited to ", kMaxPlanFileBytes, " bytes"));
  if (size < 8 || !fb::PlanBufferHasIdentifier(data))
    return absl::InvalidArgumentError(
        "not a Conduit plan file (the file identifier \"CDPL\" is missing)");
  flatbuffers::Verifier::Options options;
  options.max_depth = 16;
  options.max_tables = 100'000'000;
  flatbuffers::Verifier verifier(static_cast<const uint8_t *>(data), size, options);
  if (!fb::VerifyPlanBuffer(verifier))
    return corrupt("its structure does not verify (truncated or damaged)");
  const fb::Plan *p = fb::GetPlan(data);
  if (p->format_version() != kPlanFormatVersion)
    return absl::FailedPreconditionError(absl::StrCat(
        "plan file format version ", p->format_version(), "; this runtime reads version ",
        kPlanFormatVersion, ". Recompile the job with a matching conduit-compile."));
  if (uint64_t unknown = p->features() & ~kKnownFeatures)
    return absl::FailedPreconditionError(
        absl::StrCat("the plan file uses features this runtime does not know (bits 0x",
                     absl::Hex(unknown), "). Recompile the job with a matching conduit-compile."));
  if (!p->config() || !p->layers() || !p->stages() || !p->groups() || !p->ranks())
    return corrupt("a required table (config, layers, stages, groups or ranks) is missing");

  if (p->layers()->size() > limits::kMaxLayers + 2 ||
      p->stages()->size() > limits::kMaxPipeline * limits::kMaxStagesPerDevice ||
      p->ranks()->size() > limits::kMaxPipeline || p->groups()->size() > limits::kMaxWorld)
    return corrupt(absl::StrCat(
        "it holds ", p->layers()->size(), " layers, ", p->stages()->size(), " stages, ",
        p->groups()->size(), " groups and ", p->ranks()->size(), " rank programs; at most ",
        limits::kMaxLayers + 2, ", ", limits::kMaxPipeline * limits::kMaxStagesPerDevice, ", ",
        limits::kMaxWorld, " and ", limits::kMaxPipeline, " are supported"));
  CopyBudget budget(size);
  bool fits =
      budget.take(p->name()) && budget.take(p->source()) && budget.take(p->config()->preset());
  for (const fb::Layer *l : *p->layers())
    fits = fits && budget.take(l->name());
  for (const fb::Stage *s : *p->stages())
    fits = fits && budget.take(s->samples());
  for (const fb::Group *g : *p->groups())
    fits = fits && budget.take(g->ranks());
  for (const fb::RankProgram *r : *p->ranks())
    fits = fits && budget.take(r->slots()) &&
           (!r->instructions() ||
            budget.take(size_t(r->instructions()->size()) * sizeof(fb::Instruction)));
  if (!fits)
    return corrupt("its tables share vectors or strings (a plan file stores each once)");

  Plan plan;
  plan.formatVersion = p->format_version();
  plan.features = p->features();
  plan.name = p->name() ? p->name()->str() : "";
  plan.source = p->source() ? p->source()->str() : "";
  const fb::Config *c = p->config();
  Config &config = plan.config;
  config.pipeline = c->pipeline();
  config.data = c->data();
  config.stagesPerDevice = c->stages_per_device();
  config.schedule = static_cast<Schedule>(c->schedule());
  config.groupSize = c->group_size();
  config.microbatches = c->microbatches();
  config.microbatchSize = c->microbatch_size();
  config.sharding = static_cast<Sharding>(c->sharding());
  config.checkpointing = static_cast<Checkpointing>(c->checkpointing());
  config.fsdpWindow = c->fsdp_window();
  config.gradientReduction = static_cast<GradientReduction>(c->gradient_reduction());
  config.recomputeModules = c->recompute_modules();
  config.pipelineInner = c->rank_order() != 0;
  config.dtype = static_cast<DType>(c->dtype());
  config.optimizer = static_cast<Optimizer>(c->optimizer());
  config.adamMoments = static_cast<AdamMoments>(c->adam_moments());
  config.seed = c->seed();
  config.learningRate = c->learning_rate();
  config.tokensPerSample = c->tokens_per_sample();
  config.splitBackward = c->split_backward();
  config.dataSource.kind = static_cast<DataKind>(c->data_kind());
  config.dataSource.path = c->data_path() ? c->data_path()->str() : "";
  config.dataSource.tokenBytes = c->token_bytes();
  config.preset = c->preset() ? c->preset()->str() : "";
  config.peakFlops = c->peak_flops();
  config.efficiency = c->efficiency();
  config.memoryBytes = c->memory_bytes();
  config.gpusPerNode = c->gpus_per_node();
  config.intraNodeBandwidth = c->intra_node_bandwidth();
  config.interNodeBandwidth = c->inter_node_bandwidth();
  config.latencyS = c->latency_s();
  config.launchOverheadS = c->launch_overhead_s();
  config.tensor = c->tensor();
  config.sequenceParallel = c->sequence_parallel();
  config.tensorCommOverlap = c->tensor_comm_overlap();
  if (c->schedule() >= kNumSchedules || c->sharding() > 3 || c->dtype() > 3 || c->optimizer() > 1 ||
      c->checkpointing() > 3 || c->rank_order() > 1 || c->data_kind() > 2 ||
      c->gradient_reduction() > 1 || (c->recompute_modules() & ~uint32_t(kRecomputeAll)) != 0 ||
      c->adam_moments() > 1)
    return corrupt("the configuration holds an unknown enum value");

  config.expert = c->expert();

  if (const fb::Transformer *t = p->transformer()) {
    if (t->mlp() > 1 || t->norm() > 1 || t->position() > 1 || t->bias() > 2 || t->router() > 1 ||
        t->dispatch() > 1 || t->rope_type() > static_cast<uint8_t>(RopeType::Dynamic))
      return corrupt("the transformer holds an unknown enum value");
    Transformer &x = plan.transformer.emplace();
    x.numLayers = t->num_layers();
    x.hiddenSize = t->hidden_size();
    x.numHeads = t->num_heads();
    x.numKvHeads = t->num_kv_heads();
    x.ffnHiddenSize = t->ffn_hidden_size();
    x.seqLength = t->seq_length();
    x.vocabSize = t->vocab_size();
    x.mlp = t->mlp();
    x.norm = t->norm();
    x.position = t->position();
    x.tieEmbeddings = t->tie_embeddings();
    x.bias = t->bias();
    x.ropeTheta = t->rope_theta();
    x.normEps = t->norm_eps();
    x.headDim = t->head_dim();
    x.qkNorm = t->qk_norm();
    x.qLoraRank = t->q_lora_rank();
    x.kvLoraRank = t->kv_lora_rank();
    x.qkNopeHeadDim = t->qk_nope_head_dim();
    x.qkRopeHeadDim = t->qk_rope_head_dim();
    x.vHeadDim = t->v_head_dim();
    x.numExperts = t->num_experts();
    x.topK = t->top_k();
    x.expertFfnHiddenSize = t->expert_ffn_hidden_size();
    x.router = t->router();
    x.normalizeTopK = t->normalize_top_k();
    x.auxLossCoefficient = t->aux_loss_coefficient();
    x.sharedExperts = t->shared_experts();
    x.sharedFfnHiddenSize = t->shared_ffn_hidden_size();
    x.sharedExpertGate = t->shared_expert_gate();
    x.zLossCoefficient = t->z_loss_coefficient();
    x.dropByWeight = t->drop_by_weight();
    x.denseLayers = t->dense_layers();
    x.capacityFactor = t->capacity_factor();
    x.imbalance = t->imbalance();
    x.routerGroups = t->router_groups();
    x.routerGroupTopK = t->router_group_top_k();
    x.dispatch = t->dispatch();
    x.fp8Dispatch = t->fp8_dispatch();
    x.biasUpdateRate = t->bias_update_rate();
    x.mtpLayers = t->mtp_layers();
    x.mtpLossCoefficient = t->mtp_loss_coefficient();
    x.ropeInterleave = t->rope_interleave();
    RopeScaling &rope = x.ropeScaling;
    rope.type = static_cast<RopeType>(t->rope_type());
    rope.factor = t->rope_factor();
    rope.originalPositions = t->rope_original_positions();
    rope.lowFreqFactor = t->rope_low_freq_factor();
    rope.highFreqFactor = t->rope_high_freq_factor();
    rope.betaFast = t->rope_beta_fast();
    rope.betaSlow = t->rope_beta_slow();
    rope.truncate = !t->rope_no_truncate();
    rope.attentionFactor = t->rope_attention_factor();
    rope.mscaleAllDim = t->rope_mscale_all_dim();
    x.routedScalingFactor = t->routed_scaling_factor();
  }
  for (const fb::Layer *l : *p->layers()) {
    if (l->kind() > 3)
      return corrupt("a layer has an unknown kind");
    Layer &layer = plan.layers.emplace_back();
    layer.name = l->name() ? l->name()->str() : "";
    layer.kind = static_cast<LayerKind>(l->kind());
    layer.params = l->params();
    layer.fwdFlops = l->fwd_flops();
    layer.bwdFlops = l->bwd_flops();
    layer.bwdWeightFlops = l->bwd_weight_flops();
    layer.activationBytes = l->activation_bytes();
    layer.checkpointBytes = l->checkpoint_bytes();
    layer.outputBytes = l->output_bytes();
    layer.expertParams = l->expert_params();
  }
  for (const fb::Stage *s : *p->stages())
    plan.stages.push_back({s->index(), s->rank(), s->first_layer(), s->end_layer(), s->params(),
                           toVector(s->samples())});
  for (const fb::Group *g : *p->groups())
    plan.groups.push_back({toVector(g->ranks())});
  for (const fb::RankProgram *r : *p->ranks()) {
    RankProgram program{r->rank(), r->events(), toVector(r->slots()), {}, r->peak_memory()};
    if (const auto *instructions = r->instructions()) {
      program.instructions.reserve(instructions->size());
      for (size_t k = 0; k < instructions->size(); ++k) {
        // By value, for the same reason as toVector: the struct holds 8-byte fields.
        fb::Instruction copy;
        std::memcpy(&copy, instructions->Data() + k * sizeof(fb::Instruction), sizeof copy);
        const fb::Instruction *i = &copy;
        if (static_cast<uint8_t>(i->op()) >= kNumOps || static_cast<uint8_t>(i->kind()) > 1)
          return corrupt(absl::StrCat("rank ", r->rank(), " instruction ",
                                      program.instructions.size(), " has an unknown opcode"));
        Instruction &x = program.instructions.emplace_back();
        x.op = static_cast<Op>(i->op());
        x.stream = i->stream();
        x.kind = static_cast<Transfer>(i->kind());
        x.flags = i->flags();
        x.stage = i->stage();
        x.microbatch = i->microbatch();
        x.peer = i->peer();
        x.peerStage = i->peer_stage();
        x.peerMicrobatch = i->peer_microbatch();
        x.slot = i->slot();
        x.group = i->group();
        x.batch = i->batch();
        x.event = i->event();
        x.begin = i->begin();
        x.end = i->end();
        x.bytes = i->bytes();
      }
    }
    plan.ranks.push_back(std::move(program));
  }
  CONDUIT_RETURN_IF_ERROR(checkModelFields(plan));
  CONDUIT_RETURN_IF_ERROR(checkPlanSemantics(plan));
  return plan;
}

absl::StatusOr<Plan> readPlanFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in)
    return absl::NotFoundError(absl::StrCat("cannot open plan file ", path));
  std::streamoff size = in.tellg();
  if (size < 0 || static_cast<uint64_t>(size) > kMaxPlanFileBytes)
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": plan files are limited to ", kMaxPlanFileBytes, " bytes"));
  std::string bytes(static_cast<size_t>(size), '\0');
  in.seekg(0);
  in.read(bytes.data(), size);
  if (!in)
    return absl::UnavailableError(absl::StrCat("cannot read plan file ", path));
  absl::StatusOr<Plan> plan = readPlan(bytes.data(), bytes.size());
  if (!plan.ok())
    return absl::Status(plan.status().code(), absl::StrCat(path, ": ", plan.status().message()));
  return plan;
}

} // namespace conduit::runtime
