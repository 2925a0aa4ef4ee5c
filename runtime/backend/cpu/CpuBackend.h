//===- CpuBackend.h - plans on CPUs -----------------------------*- C++ -*-===//
//
// The development and CI backend: float32 compute through CBLAS in host memory, one MPI
// process per (pipeline rank, replica) with the MPI transport (MpiTransport.h) for transfers
// and the data-parallel collectives, or every rank a thread of one process with the loopback
// transport in host memory (LoopbackTransport.h). Compute runs synchronously inside start();
// transfers and collectives complete while the executor polls.
//
// Gradients accumulate in double precision, per sample (BackendCore<double>), so every plan of
// a job computes the same bits as the single-process reference, whatever its schedule, and
// the end-to-end tests can demand bitwise equality.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_RUNTIME_BACKEND_CPU_CPUBACKEND_H
#define CONDUIT_RUNTIME_BACKEND_CPU_CPUBACKEND_H

#include "runtime/exec/BackendCore.h"
#include "runtime/exec/Mpi.h"

namespace conduit::runtime {

class CpuBackend final : public BackendCore<double> {
public:
  /// Global rank `rank` of `worldSize`, exchanging data through `makeTransport`'s transport.
  CpuBackend(int64_t rank, int64_t worldSize, bool measureLayers, TransportFactory makeTransport);
  /// One process of an MPI job.
  explicit CpuBackend(MpiWorld world, bool measureLayers = false);
  ~CpuBackend() override;

  std::string name() const override { return "cpu"; }
  absl::Status validate(const Plan &plan) override;

private:
  absl::StatusOr<std::unique_ptr<Transport>> connect(const Plan &plan) override;
  model::Ops<float> &ops() override { return math; }
  absl::Status zeroGradients(double *grads, int64_t n, StreamHandle stream) override;
  absl::Status applyOptimizer(int64_t step, int64_t n, float *params, float *state,
                              const double *grads) override;
  absl::Status balanceBiases(float *params, double *grads, absl::Span<const int64_t> offsets,
                             double rate, double mean) override;

  int64_t worldSize;
  TransportFactory makeTransport;
  model::CpuOps<float> math;
};

} // namespace conduit::runtime

#endif // CONDUIT_RUNTIME_BACKEND_CPU_CPUBACKEND_H
