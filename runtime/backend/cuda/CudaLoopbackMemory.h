//===- CudaLoopbackMemory.h - loopback data movement on one GPU -*- C++ -*-===//
//
// NCCL refuses two ranks on one device, so for testing whole pipelines on a single GPU the
// ranks run as threads of one process and meet in a LoopbackHub (runtime/exec/
// LoopbackTransport.h), which matches what they post. This is how that hub moves data on the
// device: device-to-device copies and add kernels enqueued on the caller's stream, events as
// fences between the ranks' streams (a receiver's copy waits for the sender's data; the sender
// waits for the copy before it reuses its buffer), and stream-ordered scratch. Nothing here
// waits for the device.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_RUNTIME_BACKEND_CUDA_CUDALOOPBACKMEMORY_H
#define CONDUIT_RUNTIME_BACKEND_CUDA_CUDALOOPBACKMEMORY_H

#include "runtime/exec/LoopbackTransport.h"

namespace conduit::cuda {

class CudaLoopbackMemory final : public runtime::LoopbackMemory {
public:
  absl::StatusOr<Fence> record(runtime::StreamHandle stream) override;
  absl::Status wait(runtime::StreamHandle stream, const Fence &fence) override;
  absl::Status copy(runtime::Element type, int64_t count, const void *from, void *to,
                    runtime::StreamHandle stream) override;
  /// Float32 only: the CUDA backend's gradients are float.
  absl::Status maximum(runtime::Element type, int64_t count, const void *from, void *to,
                       runtime::StreamHandle stream) override;
  absl::Status add(runtime::Element type, int64_t count, const void *from, void *to,
                   runtime::StreamHandle stream) override;
  absl::StatusOr<void *> allocate(int64_t bytes, runtime::StreamHandle stream) override;
  absl::Status release(void *scratch, runtime::StreamHandle stream) override;
};

} // namespace conduit::cuda

#endif // CONDUIT_RUNTIME_BACKEND_CUDA_CUDALOOPBACKMEMORY_H
