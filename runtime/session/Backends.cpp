//===- Backends.cpp - the backends this build has -------------------------===//

#include "runtime/session/Backends.h"

#include "runtime/backend/cpu/CpuBackend.h"
#include "runtime/exec/LoopbackTransport.h"

#if CONDUIT_HAVE_CUDA
#include "runtime/backend/cuda/CudaBackend.h"
#include "runtime/backend/cuda/CudaLoopbackMemory.h"
#include "runtime/backend/cuda/NcclTransport.h"
#endif

#include "absl/strings/str_cat.h"

namespace conduit::runtime {

namespace {

#if CONDUIT_HAVE_CUDA
/// This process's device: its place among the processes of its node.
absl::StatusOr<int> localDevice() {
  CONDUIT_ASSIGN_OR_RETURN(int count, cuda::CudaBackend::deviceCount());
  MPI_Comm node;
  CONDUIT_MPI(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
  int local = 0;
  absl::Status ranked = mpiStatus(MPI_Comm_rank(node, &local), "MPI_Comm_rank", __FILE__, __LINE__);
  MPI_Comm_free(&node);
  CONDUIT_RETURN_IF_ERROR(ranked);
  return local % count;
}
#endif

/// The transport of rank `rank` of a loopback run; the hub lives as long as any backend.
TransportFactory transportOf(std::shared_ptr<LoopbackHub> hub, int64_t rank) {
  return [hub = std::move(hub), rank](const Plan &) -> absl::StatusOr<std::unique_ptr<Transport>> {
    return hub->transport(rank);
  };
}

absl::Status noCuda() {
  return absl::UnimplementedError(
      "this build has no CUDA backend (no conduit-run-cuda beside conduit-run: it is built "
      "where nvcc and NCCL are found); use --backend=cpu");
}

} // namespace

absl::StatusOr<BackendFactory> processBackends(const std::string &kind, const MpiWorld &world) {
  if (kind == "cpu")
    return BackendFactory(
        [world](int64_t, bool measure) -> absl::StatusOr<std::unique_ptr<Backend>> {
          return std::make_unique<CpuBackend>(world, measure);
        });
  if (kind != "cuda")
    return absl::InvalidArgumentError(absl::StrCat("no backend \"", kind, "\""));
#if CONDUIT_HAVE_CUDA
  CONDUIT_ASSIGN_OR_RETURN(int device, localDevice());
  return BackendFactory(
      [world, device](int64_t, bool measure) -> absl::StatusOr<std::unique_ptr<Backend>> {
        return std::make_unique<cuda::CudaBackend>(
            world.rank, world.size, device, measure,
            [world](const Plan &plan) -> absl::StatusOr<std::unique_ptr<Transport>> {
              return cuda::NcclTransport::create(plan, world);
            });
      });
#else
  return noCuda();
#endif
}

absl::StatusOr<BackendFactory> loopbackBackends(const std::string &kind, const Plan &plan,
                                                double timeoutS) {
  const int64_t ranks = plan.config.worldSize();
  if (kind == "cpu") {
    auto hub =
        std::make_shared<LoopbackHub>(plan, timeoutS, std::make_unique<HostLoopbackMemory>());
    return BackendFactory(
        [hub, ranks](int64_t rank, bool measure) -> absl::StatusOr<std::unique_ptr<Backend>> {
          return std::make_unique<CpuBackend>(rank, ranks, measure, transportOf(hub, rank));
        });
  }
  if (kind != "cuda")
    return absl::InvalidArgumentError(absl::StrCat("no backend \"", kind, "\""));
#if CONDUIT_HAVE_CUDA
  auto hub =
      std::make_shared<LoopbackHub>(plan, timeoutS, std::make_unique<cuda::CudaLoopbackMemory>());
  return BackendFactory(
      [hub, ranks](int64_t rank, bool measure) -> absl::StatusOr<std::unique_ptr<Backend>> {
        return std::make_unique<cuda::CudaBackend>(rank, ranks, /*device=*/0, measure,
                                                   transportOf(hub, rank));
      });
#else
  return noCuda();
#endif
}

} // namespace conduit::runtime
