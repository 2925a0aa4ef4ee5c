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

#include <cstring>
#include <fstream>

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
  config.pipelineInner = c->rank_order() != 0;
  config.dtype = static_cast<DType>(c->dtype());
  config.optimizer = static_cast<Optimizer>(c->optimizer());
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
  if (c->schedule() >= kNumSchedules || c->sharding() > 3 || c->dtype() > 3 || c->optimizer() > 1 ||
      c->checkpointing() > 2 || c->rank_order() > 1 || c->data_kind() > 2)
    return corrupt("the configuration holds an unknown enum value");

  if (const fb::Transformer *t = p->transformer()) {
    if (t->mlp() > 1 || t->norm() > 1 || t->position() > 1 || t->bias() > 2)
      return corrupt("the transformer holds an unknown enum value");
    plan.transformer = Transformer{t->num_layers(),
                                   t->hidden_size(),
                                   t->num_heads(),
                                   t->num_kv_heads(),
                                   t->ffn_hidden_size(),
                                   t->seq_length(),
                                   t->vocab_size(),
                                   t->mlp(),
                                   t->norm(),
                                   t->position(),
                                   t->tie_embeddings(),
                                   t->bias(),
                                   t->rope_theta(),
                                   t->norm_eps()};
  }
  for (const fb::Layer *l : *p->layers()) {
    if (l->kind() > 3)
      return corrupt("a layer has an unknown kind");
    plan.layers.push_back({l->name() ? l->name()->str() : "", static_cast<LayerKind>(l->kind()),
                           l->params(), l->fwd_flops(), l->bwd_flops(), l->bwd_weight_flops(),
                           l->activation_bytes(), l->checkpoint_bytes(), l->output_bytes()});
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
