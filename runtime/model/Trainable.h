//===- Trainable.h - whether conduit-run can train a plan ---------*- C++ -*-===//
//
// What conduit-run checks of a plan's model before any backend starts, as one function that
// the runtime's backends and the compiler (which notes a plan it writes that conduit-run would
// refuse) share. The compiler plans and prices more than the runtime computes: layer lists,
// FP8 linear layers, multi-token prediction, torchtitan's op-level recomputation, ...
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_RUNTIME_MODEL_TRAINABLE_H
#define CONDUIT_RUNTIME_MODEL_TRAINABLE_H

#include "runtime/plan/Plan.h"

#include "absl/status/status.h"

#include <string_view>

namespace conduit::model {

/// An FP8 plan is priced for FP8 linear layers, which no backend here computes: an error
/// naming training.dtype, else OK.
absl::Status refuseFp8(const runtime::Plan &plan);

/// Whether `plan`'s model is one conduit-run trains: a transformer (GptShape::fromPlan's
/// checks), not in FP8, recomputing under selective checkpointing only what the layers can
/// recompute (what `keeper`, "the CPU backend" say, keeps otherwise). The error names the job
/// key to change. The plan alone: the data source and a backend's own limits are checked
/// when it runs.
absl::Status checkTrainable(const runtime::Plan &plan, std::string_view keeper);

} // namespace conduit::model

#endif // CONDUIT_RUNTIME_MODEL_TRAINABLE_H
