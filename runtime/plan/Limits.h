//===- Limits.h - the bounds on every number of a job and a plan -*- C++ -*-===//
//
// The limits the compiler's job-file reader and the runtime's plan and checkpoint readers
// enforce, written once. They are far above any real job; they exist so that every figure
// derived from them (parameters per layer and stage, activation elements, samples per step)
// stays inside exact int64 and double arithmetic, and so that a hostile file cannot make a
// reader or the runtime overflow, allocate without bound or loop without end. docs/plan-file.md
// and docs/job-file.md list them. Header-only and free of MLIR: both sides include it.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_RUNTIME_PLAN_LIMITS_H
#define CONDUIT_RUNTIME_PLAN_LIMITS_H

#include <cstdint>
#include <optional>

namespace conduit::limits {

// The transformer's shape. With these, a block has at most 4h^2 + 2hf + 9h + f < 2^45
// parameters, the embedding (v + s) h < 2^46 and the head h v + 2h < 2^45.

/// Transformer blocks, and entries of a layer list (a transformer plan adds its embedding and
/// head to its blocks).
constexpr int64_t kMaxLayers = 100000;
constexpr int64_t kMaxHidden = 1 << 20;
constexpr int64_t kMaxHeads = 1 << 16;
constexpr int64_t kMaxFfn = 1 << 22;
constexpr int64_t kMaxSeqLength = 1 << 24;
constexpr int64_t kMaxVocab = 1 << 24;
/// Routed (or shared) experts of a mixture-of-experts block. A model near these bounds is
/// refused by its cost figures (a layer's figures stay below 2^53).
constexpr int64_t kMaxExperts = 1 << 16;
/// Multi-token prediction modules after the blocks (DeepSeek-V3 trains one).
constexpr int64_t kMaxMtpLayers = 16;

// The parallel configuration.

constexpr int64_t kMaxPipeline = 1 << 16;
constexpr int64_t kMaxData = 1 << 20;
constexpr int64_t kMaxTensor = 1 << 10;
constexpr int64_t kMaxStagesPerDevice = 1024;
constexpr int64_t kMaxMicrobatches = 1 << 20;
constexpr int64_t kMaxMicrobatchSize = 1 << 20;
/// Ranks: pipeline x data x tensor.
constexpr int64_t kMaxWorld = 1 << 24;
/// (stage, micro-batch) pairs of a step: beyond this a plan would not fit in memory anyway.
constexpr int64_t kMaxStageMicrobatches = 1 << 24;
/// Samples of one replica's batch (micro-batches x micro-batch size); a step trains
/// data x this many.
constexpr int64_t kMaxBatchSamples = int64_t(1) << 40;

// Counts and sizes.

/// Parameters, bytes, seeds: integers a double holds exactly.
constexpr int64_t kMaxExact = int64_t(1) << 53;
/// Training steps, and optimizer steps of a checkpoint.
constexpr int64_t kMaxSteps = int64_t(1) << 40;
constexpr int64_t kMaxGpusPerNode = 1 << 16;
constexpr double kMaxLearningRate = 1e3;

// Overflow-checked arithmetic for derived sizes: nullopt when the result does not fit.

inline std::optional<int64_t> checkedAdd(int64_t a, int64_t b) {
  int64_t out = 0;
  if (__builtin_add_overflow(a, b, &out))
    return std::nullopt;
  return out;
}

inline std::optional<int64_t> checkedMul(int64_t a, int64_t b) {
  int64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out))
    return std::nullopt;
  return out;
}

/// a x b x ... with every partial product checked.
template <typename... Rest>
std::optional<int64_t> checkedMul(int64_t a, int64_t b, int64_t c, Rest... rest) {
  std::optional<int64_t> ab = checkedMul(a, b);
  if (!ab)
    return std::nullopt;
  return checkedMul(*ab, c, rest...);
}

} // namespace conduit::limits

#endif // CONDUIT_RUNTIME_PLAN_LIMITS_H
