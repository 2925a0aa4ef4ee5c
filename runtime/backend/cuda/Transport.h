//===- Transport.h - how CUDA ranks exchange data ---------------*- C++ -*-===//
//
// The CUDA backend moves bytes through a Transport: NCCL between processes (one GPU each), or
// the loopback transport between ranks that run as threads of one process on one GPU (NCCL
// refuses two ranks on one device). Both enqueue on the caller's stream and return Work the
// backend polls; when a Work completes, everything later on that stream is ordered after the
// data movement, so the executor's events order the other streams as they do on the CPU.
//
// Ranks are global ranks; a group is a plan group (the data-parallel replicas of a stage),
// where a rank's position is its replica index. Inputs and outputs of a collective do not
// overlap, except the one buffer of an all-reduce.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_RUNTIME_BACKEND_CUDA_TRANSPORT_H
#define CONDUIT_RUNTIME_BACKEND_CUDA_TRANSPORT_H

#include "runtime/Status.h"

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <vector>

namespace conduit::cuda {

/// Data movement in flight.
class Work {
public:
  virtual ~Work() = default;
  /// Whether it completed (as far as the caller's stream is concerned); never blocks.
  virtual absl::StatusOr<bool> test() = 0;
};

/// One side of a point-to-point transfer.
struct PeerTransfer {
  bool send = true;
  int64_t peer = 0; ///< global rank
  float *data = nullptr;
  int64_t count = 0;
};

class Transport {
public:
  virtual ~Transport() = default;

  /// Posts transfers that belong together (a plan batch) on `stream`.
  virtual absl::StatusOr<std::unique_ptr<Work>>
  exchange(const std::vector<PeerTransfer> &transfers, cudaStream_t stream) = 0;
  /// full[r · count, (r + 1) · count) = shard of the member at position r.
  virtual absl::StatusOr<std::unique_ptr<Work>> allGather(int32_t group, const float *shard,
                                                          float *full, int64_t count,
                                                          cudaStream_t stream) = 0;
  /// shard = Σ over members of their full[position · count, (position + 1) · count).
  virtual absl::StatusOr<std::unique_ptr<Work>> reduceScatter(int32_t group, const float *full,
                                                              float *shard, int64_t count,
                                                              cudaStream_t stream) = 0;
  /// data = Σ over members of their data, in place.
  virtual absl::StatusOr<std::unique_ptr<Work>> allReduce(int32_t group, float *data,
                                                          int64_t count, cudaStream_t stream) = 0;
  /// The sum of `value` over every rank of the job (blocking; all ranks call it together).
  virtual absl::StatusOr<double> sumOverRanks(double value) = 0;
  /// Tears communication down without waiting for peers (after an error).
  virtual void abort() = 0;
};

} // namespace conduit::cuda

#endif // CONDUIT_RUNTIME_BACKEND_CUDA_TRANSPORT_H
