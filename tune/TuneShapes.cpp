//===- TuneShapes.cpp - the shapes of conduit-tune's space ----------------===//

#include "tune/TuneShapes.h"

#include "job/JobFile.h"
#include "job/KeyEditor.h"
#include "runtime/plan/Limits.h"
#include "runtime/plan/ScheduleRules.h"
#include "tune/Tune.h"
#include "tune/TuneBounds.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <limits>

using namespace conduit;

ParallelismSpec conduit::staticShape(const Configuration &c) {
  ParallelismSpec par;
  par.pipeline = integerOf(c, "parallelism.pipeline", 1);
  par.data = integerOf(c, "parallelism.data", 1);
  par.tensor = integerOf(c, "parallelism.tensor", 1);
  par.sequenceParallel = booleanOf(c, "parallelism.sequence_parallel", false);
  par.expert = integerOf(c, "parallelism.expert", 1);
  par.sharding = parseEnum<runtime::Sharding>(stringOf(c, "parallelism.sharding"))
                     .value_or(runtime::Sharding::None);
  return par;
}

namespace {

/// Drops, before they are listed, the shapes (T, sequence parallelism, P, D) whose static
/// state (MemoryBound.h) exceeds the device under every sharding the space may give them: no
/// micro-batch split, schedule or checkpointing of theirs can fit.
struct ShapeMemory {
  ShapeMemory(const Job &model, const SpaceRequest &request) : model(model) {
    for (const Restriction &r : request.restrictions)
      if (r.key == "parallelism.sharding")
        shardings = &r.values;
  }

  bool keep(const Configuration &c) {
    // The bound is the starting job's: a dimension outside `parallelism` (a varied cluster or
    // model key) may change it, and such spaces are left whole.
    if (llvm::any_of(c, [](const Assignment &a) {
          return !llvm::StringRef(a.key).starts_with("parallelism.");
        }))
      return true;
    ParallelismSpec par = staticShape(c);
    std::vector<runtime::Sharding> choices;
    if (shardings) {
      for (const Json &v : *shardings) {
        std::optional<runtime::Sharding> s =
            v.is_string() ? parseEnum<runtime::Sharding>(v.get_ref<const std::string &>())
                          : std::nullopt;
        if (!s)
          return true; // the reader's to refuse
        choices.push_back(*s);
      }
    } else {
      for (std::string_view name : enumNames<runtime::Sharding>())
        choices.push_back(*parseEnum<runtime::Sharding>(name));
    }
    int64_t least = std::numeric_limits<int64_t>::max();
    for (runtime::Sharding s : choices) {
      par.sharding = s;
      least = std::min(least, BoundCalculator::staticMemoryBound(model, par));
    }
    if (least <= model.cluster.memoryBytes)
      return true;
    ++dropped;
    smallest = smallest ? std::min(smallest, least) : least;
    return false;
  }

  const Job &model;
  const std::vector<Json> *shardings = nullptr;
  int64_t dropped = 0, smallest = 0;
};

/// The keys a configuration's last dimensions set, which the job-file reader reads on their
/// own (no rule relates them to another key but the split's to the schedule, which withLeaves
/// applies): configurations that differ only in them share the reader's verdict on the rest
/// (its checks of the shape and the schedule).
bool isLeafKey(std::string_view key) {
  return key == "parallelism.split_backward" || key == "parallelism.activation_checkpointing" ||
         key == "parallelism.recompute_modules" || key == "parallelism.sharding" ||
         key == "parallelism.fsdp_window" || key == "parallelism.gradient_reduction" ||
         key == "parallelism.rank_order";
}

/// A list of recompute-module names as RecomputeModule bits; none when it is not one.
std::optional<uint32_t> recomputeBits(const Json &list) {
  if (!list.is_array() || list.empty())
    return std::nullopt;
  uint32_t bits = 0;
  for (const Json &name : list) {
    const std::optional<uint32_t> bit =
        name.is_string() ? runtime::recomputeModuleBit(name.get<std::string>()) : std::nullopt;
    if (!bit)
      return std::nullopt;
    bits |= *bit;
  }
  return bits;
}

/// The recompute-module lists worth searching for `t`, the least recomputation first: the
/// attention core where it keeps one (eager), then the norms with the part of the MLP that
/// keeps the most (a dense MLP's hidden activations, the routed experts' activation outputs)
/// and latent attention's up projections. One list beside the core's keeps the space half as
/// large again at most; torchtitan's op policy, and other lists, a job names itself.
std::vector<Json> recomputeChoicesOf(const TransformerSpec &t) {
  const bool eager = !fusedAttention(t.attention);
  std::vector<Json> choices;
  if (eager)
    choices.push_back(Json::array({"core_attn"}));
  Json more = eager ? Json::array({"core_attn", "layernorm"}) : Json::array({"layernorm"});
  more.push_back(t.moe ? "moe_act" : "mlp");
  if (t.latentAttention)
    more.push_back("mla_up_proj");
  choices.push_back(std::move(more));
  return choices;
}

} // namespace

int64_t conduit::StaticBounds::bound(const Job &model, const ParallelismSpec &par) {
  auto [it, inserted] =
      bounds.try_emplace(std::make_tuple(par.pipeline, par.data, par.tensor, par.sequenceParallel,
                                         static_cast<int>(par.sharding), par.expert),
                         0);
  if (inserted)
    it->second = BoundCalculator::staticMemoryBound(model, par);
  return it->second;
}

bool conduit::sameShape(const Configuration &a, const Configuration &b) {
  size_t i = 0, j = 0;
  while (true) {
    while (i < a.size() && isLeafKey(a[i].key))
      ++i;
    while (j < b.size() && isLeafKey(b[j].key))
      ++j;
    if (i == a.size() || j == b.size())
      return i == a.size() && j == b.size();
    if (a[i].key != b[j].key || a[i].value != b[j].value)
      return false;
    ++i, ++j;
  }
}

/// A leaf's enum value as the job file spells it, into `out`; false if it is none.
template <typename Enum> static bool readLeaf(const Json &value, Enum &out) {
  std::optional<Enum> parsed =
      value.is_string() ? parseEnum<Enum>(value.get_ref<const std::string &>()) : std::nullopt;
  if (parsed)
    out = *parsed;
  return parsed.has_value();
}

std::optional<ParallelismSpec> conduit::withLeaves(const ParallelismSpec &shape,
                                                   const Configuration &c) {
  const ParallelismSpec defaults;
  ParallelismSpec par = shape;
  std::optional<bool> split;
  par.checkpointing = defaults.checkpointing;
  par.sharding = defaults.sharding;
  par.fsdpWindow = defaults.fsdpWindow;
  par.gradientReduction = defaults.gradientReduction;
  par.rankOrder = defaults.rankOrder;
  for (const Assignment &a : c) {
    if (a.key == "parallelism.split_backward") {
      if (!a.value.is_boolean())
        return std::nullopt;
      split = a.value.get<bool>();
    } else if (a.key == "parallelism.activation_checkpointing") {
      if (!readLeaf(a.value, par.checkpointing))
        return std::nullopt;
    } else if (a.key == "parallelism.recompute_modules") {
      std::optional<uint32_t> bits = recomputeBits(a.value);
      if (!bits)
        return std::nullopt;
      par.recomputeModules = *bits;
    } else if (a.key == "parallelism.sharding") {
      if (!readLeaf(a.value, par.sharding))
        return std::nullopt;
    } else if (a.key == "parallelism.rank_order") {
      if (!readLeaf(a.value, par.rankOrder))
        return std::nullopt;
    } else if (a.key == "parallelism.fsdp_window") {
      std::optional<int64_t> w = jsonInteger(a.value);
      if (!w || *w < 1 || *w > limits::kMaxStagesPerDevice)
        return std::nullopt;
      par.fsdpWindow = *w;
    } else if (a.key == "parallelism.gradient_reduction") {
      if (!readLeaf(a.value, par.gradientReduction))
        return std::nullopt;
    }
  }
  // The reader's rule: reducing each run needs sharded gradients.
  if (par.gradientReduction == runtime::GradientReduction::Run &&
      !runtime::shardsGradients(par.sharding))
    return std::nullopt;
  // The reader's one rule on the split: the zero-bubble schedules always split, and refuse
  // being told not to (the reader has the last word on that).
  if (split == false && runtime::isZeroBubble(par.schedule))
    return std::nullopt;
  par.splitBackward = split.value_or(false) || runtime::isZeroBubble(par.schedule);
  return par;
}

ConfigurationList conduit::listSpace(const Job &model, const SpaceRequest &request,
                                     llvm::ArrayRef<Dimension> dimensions, std::string &why,
                                     Unlisted &unlisted) {
  ShapeMemory shapes(model, request);
  ConfigurationList configs = listConfigurations(
      request, dimensions, why, [&](const Configuration &c) { return shapes.keep(c); });
  unlisted.shapes = shapes.dropped;
  unlisted.smallestBytes = shapes.smallest;
  return configs;
}

SpaceRequest conduit::spaceRequest(const Job &model, const TuneOptions &options, const Json *root) {
  SpaceRequest request;
  request.gpus = options.gpus;
  request.globalBatch = options.globalBatch;
  // The layers the stages cut between: multi-token prediction modules stay with the head.
  request.numLayers = static_cast<int64_t>(model.model.layers.size()) -
                      (model.model.transformer ? model.model.transformer->mtpLayers : 0);
  request.restrictions = options.restrictions;
  request.tensorSizes =
      tensorSizesOf(model.model.transformer, options.gpus, model.cluster.gpusPerNode);
  const bool attentionVaried = llvm::any_of(
      options.restrictions, [](const Restriction &r) { return r.key == "model.attention"; });
  // The job's recompute modules hold where it names them; else the search chooses them.
  const Json *named = root ? findKey(*root, "parallelism.recompute_modules") : nullptr;
  const std::optional<uint32_t> jobModules = named ? recomputeBits(*named) : std::nullopt;
  if (!named && model.model.transformer && !attentionVaried)
    request.recomputeChoices = recomputeChoicesOf(*model.model.transformer);
  // Under a fused kernel, selective checkpointing of the attention core alone is "none".
  request.selectiveCheckpointing = attentionVaried || !model.model.transformer ||
                                   !fusedAttention(model.model.transformer->attention) ||
                                   !request.recomputeChoices.empty() ||
                                   (jobModules && *jobModules != runtime::kRecomputeCoreAttention);
  request.scheduleRules = !root || !findKey(*root, "parallelism.placement");
  if (model.model.transformer && model.model.transformer->moe)
    request.numExperts = model.model.transformer->moe->numExperts;
  return request;
}
