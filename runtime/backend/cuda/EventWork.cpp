//===- EventWork.cpp - device work the host polls -------------------------===//

#include "runtime/backend/cuda/EventWork.h"

#include "runtime/backend/cuda/CudaCheck.h"

namespace conduit::cuda {

absl::StatusOr<cudaEvent_t> EventWork::record(cudaStream_t stream) {
  cudaEvent_t done = nullptr;
  CONDUIT_CUDA(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
  absl::Status recorded =
      checkResult(cudaEventRecord(done, stream), "cudaEventRecord", __FILE__, __LINE__);
  if (!recorded.ok()) {
    absl::Status ignored;
    CONDUIT_CUDA_NOTE(ignored, cudaEventDestroy(done));
    return recorded;
  }
  return done;
}

EventWork::~EventWork() {
  absl::Status ignored;
  CONDUIT_CUDA_NOTE(ignored, cudaEventDestroy(done));
}

absl::StatusOr<bool> EventWork::test() {
  const cudaError_t state = cudaEventQuery(done);
  if (state == cudaErrorNotReady)
    return false;
  CONDUIT_CUDA(state);
  return true;
}

} // namespace conduit::cuda
