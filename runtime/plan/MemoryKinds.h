//===- MemoryKinds.h - what a rank's memory is for -------------*- C++ -*-===//
//
// The categories of the compiler's memory plan (passes/PeakMemory.h), which the plan's
// predicted peaks add up, and of the runtime's own count (runtime/model/MemoryCounter.h), which
// conduit-run prints beside them: one list, so that the two compare category by category.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_RUNTIME_PLAN_MEMORYKINDS_H
#define CONDUIT_RUNTIME_PLAN_MEMORYKINDS_H

#include <cstdint>

namespace conduit::runtime {

enum class MemoryKind : uint8_t {
  Parameters,
  GatheredParameters,
  Gradients,
  OptimizerState,
  Activations,
  Working,
  ReceiveBuffers,
  SendBuffers,
  /// Between an input gradient and its deferred weight gradient: what W needs, the inputs and
  /// output gradients of the stage's weight GEMMs (each layer's weight_gradient_bytes; its
  /// activations where the layer does not state it).
  WeightGradientInputs,
};
constexpr int kNumMemoryKinds = 9;

/// "parameters", "gathered parameters", ...: how reports and conduit-run name them.
inline const char *memoryKindName(MemoryKind kind) {
  static const char *const kNames[kNumMemoryKinds] = {"parameters",
                                                      "gathered parameters",
                                                      "gradients",
                                                      "optimizer state",
                                                      "activations",
                                                      "working activations",
                                                      "receive buffers",
                                                      "outputs waiting to be sent",
                                                      "held for weight gradients"};
  return kNames[static_cast<int>(kind)];
}

/// Bytes of one gradient element in the memory plan: gradients accumulate in fp32.
constexpr int64_t kGradientBytes = 4;

} // namespace conduit::runtime

#endif // CONDUIT_RUNTIME_PLAN_MEMORYKINDS_H
