//===- CudaLoopbackMemory.cpp - loopback data movement on one GPU ---------===//

#include "runtime/backend/cuda/CudaLoopbackMemory.h"

#include "runtime/backend/cuda/CudaCheck.h"
#include "runtime/backend/cuda/Kernels.h"

namespace conduit::cuda {

using runtime::Element;
using runtime::StreamHandle;

namespace {

cudaStream_t streamOf(StreamHandle stream) { return static_cast<cudaStream_t>(stream); }

} // namespace

absl::StatusOr<CudaLoopbackMemory::Fence> CudaLoopbackMemory::record(StreamHandle stream) {
  cudaEvent_t event = nullptr;
  CONDUIT_CUDA(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  // Destroyed with its last owner; a failure there has nobody left to tell.
  Fence fence(static_cast<void *>(event), [](void *e) {
    absl::Status ignored;
    CONDUIT_CUDA_NOTE(ignored, cudaEventDestroy(static_cast<cudaEvent_t>(e)));
  });
  CONDUIT_CUDA(cudaEventRecord(event, streamOf(stream)));
  return fence;
}

absl::Status CudaLoopbackMemory::wait(StreamHandle stream, const Fence &fence) {
  CONDUIT_CUDA(cudaStreamWaitEvent(streamOf(stream), static_cast<cudaEvent_t>(fence.get()), 0));
  return absl::OkStatus();
}

absl::Status CudaLoopbackMemory::copy(Element type, int64_t count, const void *from, void *to,
                                      StreamHandle stream) {
  if (count > 0)
    CONDUIT_CUDA(cudaMemcpyAsync(to, from, count * runtime::elementBytes(type),
                                 cudaMemcpyDeviceToDevice, streamOf(stream)));
  return absl::OkStatus();
}

absl::Status CudaLoopbackMemory::add(Element type, int64_t count, const void *from, void *to,
                                     StreamHandle stream) {
  if (type != Element::Float32)
    return absl::UnimplementedError("the CUDA loopback transport adds float32 only");
  CONDUIT_CUDA(cuda::add(count, static_cast<const float *>(from), static_cast<float *>(to),
                         streamOf(stream)));
  return absl::OkStatus();
}

absl::Status CudaLoopbackMemory::maximum(Element type, int64_t count, const void *from, void *to,
                                         StreamHandle stream) {
  if (type != Element::Float32)
    return absl::UnimplementedError("the CUDA loopback transport compares float32 only");
  CONDUIT_CUDA(cuda::maximum(count, static_cast<const float *>(from), static_cast<float *>(to),
                             streamOf(stream)));
  return absl::OkStatus();
}

absl::StatusOr<void *> CudaLoopbackMemory::allocate(int64_t bytes, StreamHandle stream) {
  void *scratch = nullptr;
  CONDUIT_CUDA(cudaMallocAsync(&scratch, bytes, streamOf(stream)));
  return scratch;
}

absl::Status CudaLoopbackMemory::release(void *scratch, StreamHandle stream) {
  CONDUIT_CUDA(cudaFreeAsync(scratch, streamOf(stream)));
  return absl::OkStatus();
}

} // namespace conduit::cuda
