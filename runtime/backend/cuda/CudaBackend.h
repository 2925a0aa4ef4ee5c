//===- CudaBackend.h - plans on NVIDIA GPUs ---------------------*- C++ -*-===//
//
// The backend users deploy: the model's layers on CudaOps, float32 master parameters, optimizer
// state and gradients in device memory, Adam as one fused kernel per shard. One CUDA stream per
// plan stream; the plan's signals and waits become cudaEventRecord and cudaStreamWaitEvent, so
// the streams are ordered on the device exactly as the plan orders them, and the host never
// waits for compute. Transfers and collectives go through a Transport (NCCL, or the loopback
// transport for several ranks on one GPU) and complete while the executor polls. What every
// backend does with a plan is BackendCore's; this file holds what a GPU does differently.
//
// Numerics differ from the CPU backend in two documented ways: GEMMs run at the plan's
// precision (bf16 inputs, float32 accumulation for bf16 plans), and gradients accumulate in
// float32 over whole micro-batches (BackendCore<float>). Results therefore match the
// single-process reference within bf16 tolerance, not bitwise.
//
// Device memory is stream-ordered (cudaMallocAsync): a buffer is allocated on the stream that
// first writes it and released on the stream that last uses it, after the plan's events have
// ordered every other use.
//
// With expert parallelism, a half of a paired step posts its all-to-alls on a stream of their
// own per pass, fenced after the compute stream's writes of the send buffer and before its
// reads of the received tokens, and parks until that stream has run them; the other half's
// kernels, enqueued on the compute stream meanwhile, run beside the all-to-all.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_RUNTIME_BACKEND_CUDA_CUDABACKEND_H
#define CONDUIT_RUNTIME_BACKEND_CUDA_CUDABACKEND_H

#include "runtime/backend/cuda/CudaOps.h"
#include "runtime/exec/BackendCore.h"
#include "runtime/exec/Transport.h"

#include <array>

namespace conduit::cuda {

class CudaBackend final : public runtime::BackendCore<float> {
public:
  /// Global rank `rank` of `worldSize`, on device `device`.
  CudaBackend(int64_t rank, int64_t worldSize, int device, bool measureLayers,
              runtime::TransportFactory makeTransport);
  ~CudaBackend() override;

  /// The number of visible CUDA devices, or an error that says why there are none.
  static absl::StatusOr<int> deviceCount();

  std::string name() const override { return "cuda"; }
  absl::Status validate(const runtime::Plan &plan) override;
  absl::Status signal(int stream, int32_t event) override;
  absl::Status wait(int stream, int32_t event) override;

private:
  absl::StatusOr<std::unique_ptr<runtime::Transport>> connect(const runtime::Plan &plan) override;
  model::Ops<float> &ops() override { return *math; }
  absl::Status initialised() override;
  runtime::StreamHandle streamOf(int stream) const override { return streams[stream]; }
  absl::StatusOr<model::Buffer<float>> gatherBuffer(int64_t n, runtime::StreamHandle allocateOn,
                                                    runtime::StreamHandle releaseOn) override;
  absl::Status zeroGradients(float *grads, int64_t n, runtime::StreamHandle stream) override;
  absl::Status applyOptimizer(int64_t step, int64_t n, float *params, float *state,
                              const float *grads) override;
  absl::Status balanceBiases(float *params, float *grads, absl::Span<const int64_t> offsets,
                             double rate, double mean) override;
  runtime::StreamHandle passStream(runtime::GroupPass pass) override;
  absl::Status order(runtime::StreamHandle earlier, runtime::StreamHandle later) override;
  absl::StatusOr<std::unique_ptr<runtime::Work>> drained(runtime::StreamHandle stream) override;
  absl::Status synchronizeAll() override;
  absl::Status deviceStatus() override { return math->status(); }

  /// The plan's streams and the expert streams that exist.
  std::vector<cudaStream_t> allStreams() const;

  int64_t worldSize;
  int device;
  runtime::TransportFactory makeTransport;
  std::vector<cudaStream_t> streams; ///< by plan stream
  std::vector<cudaEvent_t> events;   ///< by plan event
  /// With expert parallelism, the streams of a paired step's all-to-alls and tensor
  /// collectives, one per pass (the transport matches each pass's on communicators of their
  /// own, so a member that pairs and one that does not still meet), and the event that orders
  /// one stream after another.
  std::array<cudaStream_t, runtime::kGroupPasses> passStreams{};
  cudaEvent_t fence = nullptr;
  std::unique_ptr<CudaOps> math;
};

} // namespace conduit::cuda

#endif // CONDUIT_RUNTIME_BACKEND_CUDA_CUDABACKEND_H
