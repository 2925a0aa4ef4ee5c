//===- TransformerCosts.h - analytic costs of transformer layers -*- C++ -*-===//
//
// Expands a transformer shape into its layer chain (embedding, blocks, head) with parameters,
// FLOPs and activation bytes per sample. The formulas and their sources are in
// docs/cost-model.md; what the cost model's roofline reads of a job is analysis/JobCosts.h.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_JOB_TRANSFORMERCOSTS_H
#define CONDUIT_JOB_TRANSFORMERCOSTS_H

#include "job/JobSpec.h"
#include "runtime/plan/Limits.h"

#include "absl/status/statusor.h"

#include <optional>
#include <string>
#include <vector>

namespace conduit {

/// Bounds on transformer dimensions, shared with the runtime's plan reader (Limits.h). They are
/// far above any real model and keep every derived figure (FLOPs, bytes) well inside exact
/// double and int64 arithmetic.
using limits::kMaxExperts;
using limits::kMaxFfn;
using limits::kMaxHeads;
using limits::kMaxHidden;
using limits::kMaxLayers;
using limits::kMaxSeqLength;
using limits::kMaxVocab;

/// A relation between dimensions that does not hold: the key to change (its name under the job
/// file's `model` section) and what would work.
struct ShapeProblem {
  std::string key;
  std::string message;
};

/// Checks the relations between dimensions (heads divide the hidden size, key/value heads
/// divide the heads); returns the first violation.
std::optional<ShapeProblem> checkTransformerShape(const TransformerSpec &shape);

/// The bound on the busiest expert rank's routed tokens over the mean that a plan assumes when
/// the job states none (model.moe.imbalance): with a capacity factor, the factor (at least 1:
/// a sample's tokens beyond capacity are dropped, its capacity rounded up); dropless, the expected
/// maximum of the E ranks' loads under uniform routing of `tokensPerRank` tokens (one rank's tokens
/// of a micro-batch) to top_k experts each, 1 + sqrt(2 ln E (1 - 1/E) / (tokens x top_k)) (Raab and
/// Steger, "Balls into Bins - A Simple and Tight Analysis", RANDOM 1998). 1 for E = 1. A trained
/// router is less even than uniform: state a measured value when there is one (docs/cost-model.md).
double defaultMoeImbalance(const MoeSpec &moe, int64_t expert, int64_t tokensPerRank);

/// The layer chain of `shape` with costs for elements of `elementBytes` bytes, the blocks'
/// linear layers keeping their inputs for the weight gradients at `savedInputBytes` an element
/// (TrainingSpec::savedInputBytes: 1 where an FP8 run keeps them cast; 0: elementBytes). Fails
/// when a figure would exceed 2^53 (beyond exact integers in a double): an absurd shape, not a
/// model; the message names the dimensions to reduce.
absl::StatusOr<std::vector<LayerSpec>>
expandTransformer(const TransformerSpec &shape, int64_t elementBytes, int64_t savedInputBytes = 0);

/// Of a block's activation bytes per sample, what selective checkpointing that recomputes
/// `modules` (runtime::RecomputeModule bits) drops: the sum of their LayerSpec::moduleBytes;
/// unset for a layer without them.
std::optional<int64_t> selectiveBytesOf(const LayerSpec &layer, uint32_t modules);

/// Parameters of the model, counting tied embedding weights once.
int64_t transformerParameters(const TransformerSpec &shape);

/// The parameters one token passes through: all but the routed experts a token is not sent to
/// (of each MoE block's routed experts, the fraction top_k / num_experts). The published
/// "active" figure of a mixture of experts; equal to transformerParameters for dense models.
int64_t transformerActiveParameters(const TransformerSpec &shape);

/// Of an MoE block's activation bytes per sample, the routed tokens' part at the mean load
/// (the dispatched copies, the experts' hidden activations and outputs): what grows with the
/// imbalance on the busiest expert rank. 0 without experts.
int64_t moeRoutedActivationBytes(const TransformerSpec &shape, int64_t elementBytes);

} // namespace conduit

#endif // CONDUIT_JOB_TRANSFORMERCOSTS_H
