//===- MemoryBound.h - memory no plan of a job can go below -----*- C++ -*-===//
//
// A lower bound of the fullest rank's peak memory, from the job alone: no partition, no
// schedule, no IR, microseconds whatever the size of the job. It charges what every rank holds
// on average, which the fullest holds at least:
//
// * the static state: parameters in the training type, fp32 gradients and the optimizer's
//   state (PeakMemory.cpp's conventions), sharded as the job says and divided over the
//   pipeline and the tensor ranks (only what tensor parallelism splits); a mixture of
//   experts' routed experts divided over the expert group instead, and sharded over their
//   expert-data group (the D x T / E ranks that hold the same experts);
// * for the schedules that run every forward of a rank before its first backward (gpipe and
//   breadth-first, by their definition), what every micro-batch keeps for its backward.
//
// The compiler refuses a job above the device's memory before scheduling it (a job of
// millions of (stage, micro-batch) pairs would otherwise be scheduled, lowered and simulated
// to be refused by the memory plan); conduit-tune prunes with the static part.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_ANALYSIS_MEMORYBOUND_H
#define CONDUIT_ANALYSIS_MEMORYBOUND_H

#include "job/JobSpec.h"

#include <cstdint>

namespace conduit {

struct MemoryBound {
  int64_t staticBytes = 0;     ///< parameters, gradients and optimizer state
  int64_t activationBytes = 0; ///< what the schedule's definition keeps for the backwards
  int64_t total() const { return staticBytes + activationBytes; }
};

/// Parameters, fp32 gradients and the optimizer's state of `params` parameters (one tensor
/// rank's share) as `par` shards them over its replicas: PeakMemory.cpp's conventions, stated
/// once for the bound below and the tuner's per-rank bounds. Of `params`, `expertParams` are
/// routed experts (one expert rank's share), sharded over the D x T / E ranks of their
/// expert-data group instead of the D replicas.
int64_t staticStateBytes(const Job &job, const ParallelismSpec &par, int64_t params,
                         int64_t expertParams = 0);

/// The bound for `job` run as `par` (the job's model and training sections, `par`'s P, D, T,
/// sharding, checkpointing, schedule and batch).
MemoryBound memoryLowerBound(const Job &job, const ParallelismSpec &par);
inline MemoryBound memoryLowerBound(const Job &job) {
  return memoryLowerBound(job, job.parallelism);
}

} // namespace conduit

#endif // CONDUIT_ANALYSIS_MEMORYBOUND_H
