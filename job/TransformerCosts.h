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

/// The layer chain of `shape` with costs for elements of `elementBytes` bytes. Fails when a
/// figure would exceed 2^53 (beyond exact integers in a double): an absurd shape, not a model;
/// the message names the dimensions to reduce.
absl::StatusOr<std::vector<LayerSpec>> expandTransformer(const TransformerSpec &shape,
                                                         int64_t elementBytes);

/// Parameters of the model, counting tied embedding weights once.
int64_t transformerParameters(const TransformerSpec &shape);

} // namespace conduit

#endif // CONDUIT_JOB_TRANSFORMERCOSTS_H
