//===- EventWork.h - device work the host polls -----------------*- C++ -*-===//
//
// A Work that completes once a CUDA event has passed, that is once everything its stream held
// when the event was recorded has run; it owns the event. The CUDA backend waits so for a
// paired step's all-to-alls on their own stream (CudaBackend::drained), and the NCCL transport
// for its collectives, whose Work also reports the communicator's asynchronous errors while it
// waits (NcclTransport.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_RUNTIME_BACKEND_CUDA_EVENTWORK_H
#define CONDUIT_RUNTIME_BACKEND_CUDA_EVENTWORK_H

#include "runtime/exec/Transport.h"

#include <cuda_runtime.h>

#include <memory>

namespace conduit::cuda {

class EventWork : public runtime::Work {
public:
  /// The Work of what `stream` holds now: an event recorded on it.
  template <typename W = EventWork, typename... Args>
  static absl::StatusOr<std::unique_ptr<W>> after(cudaStream_t stream, Args... args);
  ~EventWork() override;
  /// Whether the event has passed; never blocks.
  absl::StatusOr<bool> test() override;

protected:
  explicit EventWork(cudaEvent_t done) : done(done) {}

private:
  static absl::StatusOr<cudaEvent_t> record(cudaStream_t stream);
  cudaEvent_t done;
};

template <typename W, typename... Args>
absl::StatusOr<std::unique_ptr<W>> EventWork::after(cudaStream_t stream, Args... args) {
  CONDUIT_ASSIGN_OR_RETURN(cudaEvent_t done, record(stream));
  return std::unique_ptr<W>(new W(done, args...));
}

} // namespace conduit::cuda

#endif // CONDUIT_RUNTIME_BACKEND_CUDA_EVENTWORK_H
