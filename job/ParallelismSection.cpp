//===- ParallelismSection.cpp - the job file's parallelism section --------===//
//
// The pipeline, data, tensor and expert degrees, the schedule and its options, sharding and
// checkpointing, and the optional explicit layouts (stage layers, micro-batch partitions).
// What these mean together, and against the model, is checked in JobChecks.cpp.
//
//===----------------------------------------------------------------------===//

#include "job/JobParser.h"
#include "runtime/plan/Limits.h"

using namespace conduit;
using namespace conduit::detail;

namespace {

/// Reads a list of positive integers at `keyPath`.
std::optional<std::vector<int64_t>> readPositiveList(const Json &value, const std::string &keyPath,
                                                     int64_t max, Diagnostics &diag) {
  if (!value.is_array() || value.empty()) {
    diag.report(keyPath,
                "expected a non-empty array of positive integers, got " + describeJson(value));
    return std::nullopt;
  }
  std::vector<int64_t> out;
  for (size_t i = 0; i < value.size(); ++i) {
    std::optional<int64_t> n =
        readInteger(value[i], keyPath + "[" + std::to_string(i) + "]", 1, max, diag);
    if (!n)
      return std::nullopt;
    out.push_back(*n);
  }
  return out;
}

/// Reads parallelism.recompute_modules: a non-empty list of RecomputeModule names, each once.
std::optional<uint32_t> readRecomputeModules(const Json &value, const std::string &keyPath,
                                             Diagnostics &diag) {
  const std::string names = runtime::quotedRecomputeModules(runtime::kRecomputeAll);
  if (!value.is_array() || value.empty()) {
    diag.report(keyPath, "expected a non-empty array of " + names + ", got " +
                             (value.is_array() ? "an empty array" : describeJson(value)));
    return std::nullopt;
  }
  uint32_t modules = 0;
  for (size_t i = 0; i < value.size(); ++i) {
    const std::string at = keyPath + "[" + std::to_string(i) + "]";
    const std::optional<uint32_t> bit =
        value[i].is_string() ? runtime::recomputeModuleBit(value[i].get_ref<const std::string &>())
                             : std::nullopt;
    if (!bit) {
      diag.report(at, "expected one of " + names + ", got " + describeJson(value[i]));
      return std::nullopt;
    }
    if (modules & *bit) {
      diag.report(at, describeJson(value[i]) + " is listed twice");
      return std::nullopt;
    }
    modules |= *bit;
  }
  if ((modules & runtime::kRecomputeOp) && modules != runtime::kRecomputeOp) {
    diag.report(keyPath, "\"op\" is torchtitan's whole op-level policy, which already decides "
                         "what every part of a block keeps; list it alone");
    return std::nullopt;
  }
  return modules;
}

} // namespace

void JobParser::parseParallelism(ObjectReader &section, ParallelismSpec &p) {
  using runtime::Schedule;
  for (std::string_view key : {"pipeline", "schedule", "microbatches"})
    if (!section.require(key))
      return;
  p.pipeline = section.integer("pipeline", 1, limits::kMaxPipeline).value_or(1);
  p.data = section.integer("data", 1, limits::kMaxData).value_or(1);
  p.tensor = section.integer("tensor", 1, limits::kMaxTensor).value_or(1);
  p.sequenceParallel = section.boolean("sequence_parallel").value_or(false);
  // Applies with sequence parallelism only (a tuner may turn that off and on): without it the
  // tensor collectives are exposed whatever this says.
  p.tensorCommOverlap = section.boolean("tensor_comm_overlap").value_or(true);
  p.expert = section.integer("expert", 1, limits::kMaxWorld).value_or(1);
  p.stagesPerDevice =
      section.integer("stages_per_device", 1, limits::kMaxStagesPerDevice).value_or(1);
  if (auto schedule = readEnum<Schedule>(section, "schedule"))
    p.schedule = *schedule;
  p.microbatches = section.integer("microbatches", 1, limits::kMaxMicrobatches).value_or(1);
  p.microbatchSize = section.integer("microbatch_size", 1, limits::kMaxMicrobatchSize).value_or(1);
  std::optional<int64_t> group = section.integer("group_size", 1, limits::kMaxMicrobatches);
  if (auto sharding = readEnum<runtime::Sharding>(section, "sharding"))
    p.sharding = *sharding;
  if (auto checkpointing = readEnum<runtime::Checkpointing>(section, "activation_checkpointing"))
    p.checkpointing = *checkpointing;
  // Read whatever the checkpointing (a tuner varies it); only selective checkpointing uses it.
  if (const Json *modules = section.value("recompute_modules"))
    if (auto bits = readRecomputeModules(*modules, section.keyPath("recompute_modules"), diag))
      p.recomputeModules = *bits;
  p.fsdpWindow = section.integer("fsdp_window", 1, limits::kMaxStagesPerDevice).value_or(2);
  if (auto reduction = readEnum<runtime::GradientReduction>(section, "gradient_reduction"))
    p.gradientReduction = *reduction;
  if (auto order = readEnum<RankOrder>(section, "rank_order"))
    p.rankOrder = *order;
  const bool vSchedule = p.schedule == Schedule::ZeroBubbleV || p.schedule == Schedule::DualPipeV;
  p.placement = vSchedule ? Placement::V : Placement::Loop;
  if (auto placement = readEnum<Placement>(section, "placement"))
    p.placement = *placement;
  std::optional<bool> split = section.boolean("split_backward");
  p.splitBackward = split.value_or(false) || isZeroBubble(p.schedule);
  // Read whatever the schedule (a tuner varies it), as recompute_modules is; only split
  // backwards use it.
  p.maxDeferredWeightGradients =
      section.integer("max_deferred_weight_gradients", 0, limits::kMaxMicrobatches);
  if (const Json *layout = section.value("stage_layers"))
    if (auto list =
            readPositiveList(*layout, section.keyPath("stage_layers"), limits::kMaxLayers, diag))
      p.stageLayers = std::move(*list);
  if (const Json *partitions = section.value("microbatch_partitions")) {
    std::string at = section.keyPath("microbatch_partitions");
    if (partitions->is_string()) {
      if (partitions->get_ref<const std::string &>() == "auto")
        p.autoPartitions = true;
      else
        diag.report(at, "expected \"auto\" or an array with one list of micro-batch sizes per "
                        "stage, got " +
                            describeJson(*partitions));
    } else if (partitions->is_array() && !partitions->empty()) {
      for (size_t s = 0; s < partitions->size(); ++s) {
        auto list = readPositiveList((*partitions)[s], at + "[" + std::to_string(s) + "]",
                                     limits::kMaxMicrobatchSize * limits::kMaxMicrobatches, diag);
        if (!list)
          break;
        p.microbatchPartitions.push_back(std::move(*list));
      }
    } else {
      diag.report(at, "expected \"auto\" or an array with one list of micro-batch sizes per "
                      "stage, got " +
                          describeJson(*partitions));
    }
  }
  section.rejectUnknownKeys();
  if (diag.failed())
    return;
  const std::string schedule(enumName(p.schedule));
  if (split == false && isZeroBubble(p.schedule)) {
    diag.report(section.keyPath("split_backward"),
                "schedule \"" + schedule +
                    "\" always splits backwards into input and weight gradients; remove "
                    "split_backward, or choose a schedule with whole backwards (gpipe, 1f1b, "
                    "depth-first, breadth-first)");
    return;
  }
  if (p.gradientReduction == runtime::GradientReduction::Run &&
      !runtime::shardsGradients(p.sharding)) {
    diag.report(section.keyPath("gradient_reduction"),
                "\"run\" reduces sharded gradients as they are computed, but sharding is \"" +
                    std::string(enumName(p.sharding)) +
                    "\", which keeps whole gradients all step; set sharding to \"gradients\" or "
                    "\"full\", or remove gradient_reduction");
    return;
  }
  if (group && !isInterleaved(p.schedule)) {
    diag.report(section.keyPath("group_size"),
                "only applies to schedules \"depth-first\" and \"interleaved-zb\" (the "
                "schedule is \"" +
                    schedule + "\")");
    return;
  }
  p.groupSize = group.value_or(p.pipeline);
}
