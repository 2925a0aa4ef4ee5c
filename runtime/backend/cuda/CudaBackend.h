//===- CudaBackend.h - plans on NVIDIA GPUs ---------------------*- C++ -*-===//
//
// The backend users deploy: the model's layers on CudaOps, float32 master parameters, optimizer
// state and gradients in device memory, Adam as one fused kernel per shard. One CUDA stream per
// plan stream; the plan's signals and waits become cudaEventRecord and cudaStreamWaitEvent, so
// the streams are ordered on the device exactly as the plan orders them, and the host never
// waits for compute. Transfers and collectives go through a Transport (NCCL, or the loopback
// transport for several ranks on one GPU) and complete while the executor polls.
//
// Numerics differ from the CPU backend in two documented ways: GEMMs run at the plan's
// precision (bf16 inputs, float32 accumulation for bf16 plans), and gradients accumulate in
// float32 over whole micro-batches. Results therefore match the single-process reference
// within bf16 tolerance, not bitwise.
//
// Device memory is stream-ordered (cudaMallocAsync): a buffer is allocated on the stream that
// first writes it and released on the stream that last uses it, after the plan's events have
// ordered every other use.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_RUNTIME_BACKEND_CUDA_CUDABACKEND_H
#define CONDUIT_RUNTIME_BACKEND_CUDA_CUDABACKEND_H

#include "runtime/backend/cuda/CudaOps.h"
#include "runtime/backend/cuda/Transport.h"
#include "runtime/exec/Backend.h"
#include "runtime/exec/StageWork.h"
#include "runtime/model/Optimizer.h"

#include <functional>
#include <map>
#include <optional>

namespace conduit::cuda {

/// Makes the transport once the plan is known (every rank calls it together).
using TransportFactory =
    std::function<absl::StatusOr<std::unique_ptr<Transport>>(const runtime::Plan &)>;

class CudaBackend final : public runtime::Backend {
public:
  /// Global rank `rank` of `worldSize`, on device `device`.
  CudaBackend(int64_t rank, int64_t worldSize, int device, bool measureLayers,
              TransportFactory makeTransport);
  ~CudaBackend() override;

  /// The number of visible CUDA devices, or an error that says why there are none.
  static absl::StatusOr<int> deviceCount();

  std::string name() const override { return "cuda"; }
  absl::Status validate(const runtime::Plan &plan) override;
  absl::Status initialise(const runtime::Plan &plan) override;
  absl::Status beginStep(int64_t step) override;
  absl::StatusOr<runtime::Ticket> start(const std::vector<int64_t> &indices) override;
  absl::StatusOr<bool> poll(runtime::Ticket ticket) override;
  absl::Status signal(int stream, int32_t event) override;
  absl::Status wait(int stream, int32_t event) override;
  absl::StatusOr<runtime::StepOutcome> endStep(int64_t step) override;
  absl::StatusOr<std::vector<runtime::StageState>> snapshot() override;
  absl::Status restore(const std::vector<runtime::StageState> &states) override;
  absl::StatusOr<std::vector<std::vector<float>>> stageParameters() override;
  std::vector<runtime::LayerTiming> layerTimings() const override { return timer.timings(); }
  void clearLayerTimings() override { timer.clear(); }

  void abort() override;

private:
  struct Stage;
  struct Pending {
    std::unique_ptr<Work> work;
    Stage *gathered = nullptr; ///< an all-gather: the stage's parameters are whole after it
    Stage *reduced = nullptr;  ///< a reduce-scatter: the accumulators restart from zero
    cudaStream_t stream = nullptr;
  };

  absl::Status forward(const runtime::Instruction &inst);
  absl::Status backward(const runtime::Instruction &inst);
  absl::Status optimizerStep(Stage &stage);
  absl::Status postTransfers(const std::vector<int64_t> &indices, Pending &pending);
  absl::Status postCollective(const runtime::Instruction &inst, Pending &pending);
  /// The input (forward) or output gradient (backward) of a micro-batch produced by a stage
  /// of this rank; `scratch` holds it when the two stages cut the batch differently.
  absl::StatusOr<const float *> localInput(const Stage &consumer, int64_t mb, bool forward,
                                           model::Buffer<float> &scratch);
  absl::StatusOr<int64_t> floatsOf(const runtime::Instruction &inst) const;
  /// Waits for `work` (outside a step: restore, stageParameters).
  absl::Status complete(std::unique_ptr<Work> work);
  absl::Status synchronizeStreams();

  int64_t rank, worldSize;
  int device;
  bool measureLayers;
  TransportFactory makeTransport;
  const runtime::Plan *plan = nullptr;
  runtime::RankPosition where;
  std::optional<model::GptShape> shape;
  std::optional<model::SyntheticData> data;
  model::OptimizerConfig optimizer;
  bool sharded = false;
  int64_t rowFloats = 0;
  std::vector<cudaStream_t> streams; ///< by plan stream
  std::vector<cudaEvent_t> events;   ///< by plan event
  // Declared before what they allocate, so that they outlive it.
  std::unique_ptr<CudaOps> ops;
  std::unique_ptr<Transport> transport;
  std::vector<std::unique_ptr<Stage>> stages; ///< indexed by stage; null when not local
  std::vector<model::Buffer<float>> slots;
  std::map<runtime::Ticket, Pending> pending;
  runtime::Ticket nextTicket = 0;
  int64_t step = 0;
  runtime::LayerTimer timer;
};

} // namespace conduit::cuda

#endif // CONDUIT_RUNTIME_BACKEND_CUDA_CUDABACKEND_H
