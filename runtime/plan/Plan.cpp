//===- Plan.cpp - names and orders of the plan's data -----------------------===//
//
// The few functions of the plan's data model: the names of ops and schedules as the plan file
// and its dump spell them, an instruction described for error messages, and the order in
// which one micro-batch's compute may run (ComputeProgress), which the semantic check and the
// executor both apply.
//
//===----------------------------------------------------------------------===//

#include "runtime/plan/Plan.h"

#include "absl/strings/str_cat.h"

namespace conduit::runtime {

const char *opName(Op op) {
  static const char *const kNames[kNumOps] = {"forward",
                                              "backward",
                                              "send",
                                              "recv",
                                              "all_gather",
                                              "reduce_scatter",
                                              "all_reduce",
                                              "free",
                                              "optimizer_step",
                                              "signal",
                                              "wait",
                                              "backward_input",
                                              "backward_weight",
                                              "tie_grads",
                                              "tensor_all_reduce",
                                              "tensor_all_gather",
                                              "tensor_reduce_scatter",
                                              "expert_dispatch",
                                              "expert_combine"};
  auto index = static_cast<size_t>(op);
  return index < kNumOps ? kNames[index] : "unknown";
}

const char *scheduleName(Schedule schedule) {
  static const char *const kNames[kNumSchedules] = {"gpipe",         "1f1b",     "depth-first",
                                                    "breadth-first", "zb-h1",    "interleaved-zb",
                                                    "zbv",           "dualpipev"};
  auto index = static_cast<size_t>(schedule);
  return index < kNumSchedules ? kNames[index] : "unknown";
}

std::string describe(const Instruction &inst) {
  switch (inst.op) {
  case Op::Forward:
    return absl::StrCat("F s", inst.stage, " mb", inst.microbatch);
  case Op::Backward:
    return absl::StrCat("B s", inst.stage, " mb", inst.microbatch);
  case Op::BackwardInput:
    return absl::StrCat("I s", inst.stage, " mb", inst.microbatch);
  case Op::BackwardWeight:
    return absl::StrCat("W s", inst.stage, " mb", inst.microbatch);
  case Op::Send:
  case Op::Recv:
    return absl::StrCat(opName(inst.op),
                        inst.kind == Transfer::Activation ? " activation" : " gradient", " s",
                        inst.stage, " mb", inst.microbatch, inst.op == Op::Send ? " to " : " from ",
                        "rank ", inst.peer, " (s", inst.peerStage, " mb", inst.peerMicrobatch,
                        ", samples [", inst.begin, ", ", inst.end, "))");
  case Op::Signal:
  case Op::Wait:
    return absl::StrCat(opName(inst.op), " event ", inst.event, " on stream ", inst.stream);
  case Op::TieGrads:
    return absl::StrCat("tie_grads s", inst.stage, " with rank ", inst.peer, " s", inst.peerStage);
  case Op::TensorAllReduce:
  case Op::TensorAllGather:
  case Op::TensorReduceScatter:
  case Op::ExpertDispatch:
  case Op::ExpertCombine:
    return absl::StrCat(opName(inst.op), " s", inst.stage, " mb", inst.microbatch, " ", inst.bytes,
                        " bytes");
  default:
    return absl::StrCat(opName(inst.op), " s", inst.stage);
  }
}

const char *ComputeProgress::take(Op op) {
  switch (op) {
  case Op::Forward:
    forward = true;
    return nullptr;
  case Op::Backward:
    if (!forward)
      return "no forward of this micro-batch comes before it";
    if (input || weight)
      return "an earlier backward_input splits this micro-batch's backward; it cannot also run "
             "whole";
    if (whole)
      return "a backward of this micro-batch comes before it";
    whole = true;
    return nullptr;
  case Op::BackwardInput:
    if (!forward)
      return "no forward of this micro-batch comes before it";
    if (whole)
      return "a whole backward of this micro-batch comes before it; it cannot also run split";
    if (input)
      return "a backward_input of this micro-batch comes before it";
    input = true;
    return nullptr;
  case Op::BackwardWeight:
    if (whole)
      return "a whole backward of this micro-batch comes before it; it cannot also run split";
    if (weight)
      return "a backward_weight of this micro-batch comes before it";
    if (!input)
      return "no backward_input of this micro-batch comes before it";
    weight = true;
    return nullptr;
  default:
    return nullptr;
  }
}

uint64_t requiredFeatures(const Plan &plan) {
  const Config &c = plan.config;
  return plan.features |
         (c.gradientReduction == GradientReduction::Run ? kFeatureGradientReductionRun : 0) |
         (c.recomputeModules != kRecomputeCoreAttention ? kFeatureRecomputeModules : 0) |
         (c.adamMoments == AdamMoments::BF16 ? kFeatureBf16Moments : 0) |
         (c.checkpointing == Checkpointing::Blocks ? kFeatureBlocksCheckpointing : 0) |
         (plan.transformer && plan.transformer->groupLimited() ? kFeatureGroupLimitedRouting : 0) |
         (plan.transformer && plan.transformer->balancesBias() ? kFeatureExpertBiasUpdate : 0) |
         (plan.transformer && plan.transformer->mtpLayers > 0 ? kFeatureMtp : 0) |
         (plan.transformer && plan.transformer->ropeInterleave ? kFeatureRopeInterleave : 0) |
         (plan.transformer && plan.transformer->ropeScaling.scaled() ? kFeatureRopeScaling : 0) |
         (plan.transformer && plan.transformer->routedScalingFactor != 1 ? kFeatureRoutedScaling
                                                                         : 0) |
         (plan.transformer && plan.transformer->sharedExpertGate ? kFeatureSharedExpertGate : 0) |
         (plan.transformer && plan.transformer->ropeScaling.type == RopeType::Dynamic
              ? kFeatureDynamicRope
              : 0) |
         (plan.transformer && plan.transformer->zLossCoefficient > 0 ? kFeatureRouterZLoss : 0) |
         (plan.transformer && plan.transformer->dropByWeight ? kFeatureDropByWeight : 0);
}

} // namespace conduit::runtime
