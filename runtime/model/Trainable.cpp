//===- Trainable.cpp - whether conduit-run can train a plan ---------------===//

#include "runtime/model/Trainable.h"

#include "runtime/Status.h"
#include "runtime/model/GptShape.h"

#include "absl/strings/str_cat.h"

namespace conduit::model {

using runtime::Plan;

absl::Status refuseFp8(const Plan &plan) {
  if (plan.config.dtype != runtime::DType::FP8)
    return absl::OkStatus();
  return absl::FailedPreconditionError(
      "training.dtype is \"fp8\": the plan is priced for FP8 linear layers, which conduit-run "
      "does not compute; compile the job with --set training.dtype=bf16 to train it");
}

absl::Status checkTrainable(const Plan &plan, std::string_view keeper) {
  CONDUIT_RETURN_IF_ERROR(refuseFp8(plan));
  CONDUIT_RETURN_IF_ERROR(GptShape::fromPlan(plan).status());
  // Selective checkpointing recomputes the attention core, the norms' outputs, the dense MLPs'
  // and the routed experts' hidden activations, and latent attention's heads.
  constexpr uint32_t kTrained = runtime::kRecomputeCoreAttention | runtime::kRecomputeLayerNorm |
                                runtime::kRecomputeMlp | runtime::kRecomputeMoeActivation |
                                runtime::kRecomputeLatentUpProjection;
  const runtime::Config &c = plan.config;
  if (c.checkpointing == runtime::Checkpointing::Selective && (c.recomputeModules & ~kTrained) != 0)
    return absl::FailedPreconditionError(absl::StrCat(
        "parallelism.recompute_modules is [", runtime::quotedRecomputeModules(c.recomputeModules),
        "]: the plan drops activations that ", std::string(keeper), " keeps (it recomputes ",
        runtime::quotedRecomputeModules(kTrained),
        " only); compile the job with those to train it"));
  return absl::OkStatus();
}

} // namespace conduit::model
