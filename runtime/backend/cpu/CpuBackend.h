//===- CpuBackend.h - plans on CPUs, with MPI -------------------*- C++ -*-===//
//
// The development and CI backend: one MPI process per (pipeline rank, replica), float32
// compute through CBLAS, point-to-point transfers with MPI_Isend/MPI_Irecv on a pipeline
// communicator per replica, and the data-parallel collectives as non-blocking MPI collectives
// on one communicator per plan group. Compute runs synchronously inside start(); transfers
// and collectives complete while the executor polls.
//
// Gradients accumulate in double precision, per micro-batch. Sums of a few float
// contributions in double are exact in practice, so the gradient of a step does not depend on
// the order the schedule runs its micro-batches or on how replicas split the batch: every
// plan of a job computes the same bits as the single-process reference, whatever its
// schedule, and the end-to-end tests can demand near equality.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_RUNTIME_BACKEND_CPU_CPUBACKEND_H
#define CONDUIT_RUNTIME_BACKEND_CPU_CPUBACKEND_H

#include "runtime/backend/cpu/Mpi.h"
#include "runtime/exec/Backend.h"
#include "runtime/exec/StageWork.h"
#include "runtime/model/Data.h"
#include "runtime/model/Gpt.h"
#include "runtime/model/Optimizer.h"

#include <map>
#include <memory>
#include <optional>

namespace conduit::runtime {

class CpuBackend final : public Backend {
public:
  explicit CpuBackend(MpiWorld world, bool measureLayers = false);
  ~CpuBackend() override;

  std::string name() const override { return "cpu"; }
  absl::Status validate(const Plan &plan) override;
  absl::Status initialise(const Plan &plan) override;
  absl::Status beginStep(int64_t step) override;
  absl::StatusOr<Ticket> start(const std::vector<int64_t> &indices) override;
  absl::StatusOr<bool> poll(Ticket ticket) override;
  absl::StatusOr<StepOutcome> endStep(int64_t step) override;
  absl::StatusOr<std::vector<StageState>> snapshot() override;
  absl::Status restore(const std::vector<StageState> &states) override;
  absl::StatusOr<std::vector<std::vector<float>>> stageParameters() override;
  std::vector<LayerTiming> layerTimings() const override;
  void clearLayerTimings() override { timer.clear(); }

  RankPosition position() const { return where; }

private:
  struct Stage;
  struct Pending {
    std::vector<MPI_Request> requests;
    Stage *gathered = nullptr; ///< an all-gather: the stage's parameters are whole after it
    Stage *reduced = nullptr;  ///< a reduction: the stage's accumulators restart from zero
  };

  absl::Status forward(const Instruction &inst);
  absl::Status backward(const Instruction &inst);
  absl::Status optimizerStep(Stage &stage);
  absl::Status postTransfer(const Instruction &inst, Pending &pending);
  absl::Status postCollective(const Instruction &inst, Pending &pending);
  absl::StatusOr<const float *> localInput(const Stage &consumer, int64_t mb, bool forward,
                                           std::vector<float> &scratch) const;
  model::Tokens tokensOf(const Stage &stage, int64_t mb, std::vector<int32_t> &tokens,
                         std::vector<int32_t> &targets) const;

  MpiWorld world;
  bool measureLayers;
  model::CpuOps<float> ops;
  const Plan *plan = nullptr;
  RankPosition where;
  std::optional<model::GptShape> shape;
  std::optional<model::SyntheticData> data;
  model::OptimizerConfig optimizer;
  bool sharded = false; ///< parameters or optimizer state split over replicas
  int64_t rowFloats = 0; ///< floats of one sample's activations
  MPI_Comm pipeComm = MPI_COMM_NULL;
  std::vector<MPI_Comm> groupComms; ///< per plan group; MPI_COMM_NULL where not a member
  std::vector<std::unique_ptr<Stage>> stages; ///< indexed by stage; null when not local
  std::vector<std::vector<float>> slots;
  std::map<Ticket, Pending> pending;
  Ticket nextTicket = 0;
  int64_t step = 0;
  double lossSum = 0;
  LayerTimer timer;
};

} // namespace conduit::runtime

#endif // CONDUIT_RUNTIME_BACKEND_CPU_CPUBACKEND_H
