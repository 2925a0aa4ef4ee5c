//===- CpuBackend.cpp - plans on CPUs -------------------------------------===//

#include "runtime/backend/cpu/CpuBackend.h"

#include "runtime/exec/MpiTransport.h"

#include "absl/strings/str_cat.h"

#include <algorithm>

namespace conduit::runtime {

CpuBackend::CpuBackend(int64_t rank, int64_t worldSize, bool measureLayers,
                       TransportFactory makeTransport)
    : BackendCore(rank, measureLayers), worldSize(worldSize),
      makeTransport(std::move(makeTransport)) {}

CpuBackend::CpuBackend(MpiWorld world, bool measureLayers)
    : CpuBackend(world.rank, world.size, measureLayers,
                 [world](const Plan &plan) -> absl::StatusOr<std::unique_ptr<Transport>> {
                   return MpiTransport::create(plan, world);
                 }) {}

CpuBackend::~CpuBackend() { release(); }

absl::Status CpuBackend::validate(const Plan &p) {
  const Config &c = p.config;
  if (worldSize != c.worldSize())
    return absl::FailedPreconditionError(
        absl::StrCat("the plan runs on ", c.worldSize(), " processes (pipeline ", c.pipeline,
                     " x data ", c.data, c.tensor > 1 ? absl::StrCat(" x tensor ", c.tensor) : "",
                     "); this run has ", worldSize, ": start it with mpirun -np ", c.worldSize()));
  CONDUIT_RETURN_IF_ERROR(validateModel(p, "CPU"));
  CONDUIT_ASSIGN_OR_RETURN(model::GptShape shape, model::GptShape::fromPlan(p));
  const RankPosition where = RankPosition::of(c, rank);
  CONDUIT_ASSIGN_OR_RETURN(int64_t needed,
                           rankMemoryBytes(p, shape, where.pipelineRank, sizeof(double)));
  const int64_t host = hostMemoryBytes();
  if (host > 0 && needed > host)
    return absl::ResourceExhaustedError(absl::StrCat(
        "pipeline rank ", where.pipelineRank, " needs at least ", formatBytes(needed),
        " (parameters, gradients and optimizer state of its stages, receive slots and the "
        "activations of one micro-batch); this machine has ",
        formatBytes(host), ". Compile the job for more pipeline stages or a smaller model"));
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Transport>> CpuBackend::connect(const Plan &p) {
  return makeTransport(p);
}

absl::Status CpuBackend::zeroGradients(double *grads, int64_t n, StreamHandle) {
  std::fill(grads, grads + n, 0.0);
  return absl::OkStatus();
}

absl::Status CpuBackend::balanceBiases(float *params, double *grads,
                                       absl::Span<const int64_t> offsets, double rate,
                                       double mean) {
  for (int64_t i : offsets)
    model::balanceBias(rate, mean, params[i], grads[i]);
  return absl::OkStatus();
}

absl::Status CpuBackend::applyOptimizer(int64_t step, int64_t n, float *params, float *state,
                                        const double *grads) {
  model::optimizerStep(optimizer, step, n, params, state, grads);
  return absl::OkStatus();
}

} // namespace conduit::runtime
