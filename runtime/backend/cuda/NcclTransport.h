//===- NcclTransport.h - CUDA ranks in separate processes -------*- C++ -*-===//
//
// One process per rank and one GPU per process. Rank 0 creates the NCCL unique id and MPI
// broadcasts it; every process then joins one world communicator, which carries the
// point-to-point transfers (a plan batch is one ncclGroupStart/End), and splits it into one
// communicator per plan group and tensor rank for the data-parallel collectives, ranked by
// replica, and, with tensor parallelism, one per tensor group, ranked by tensor rank, whose
// collectives the layers enqueue on the compute stream (NCCL gives every member the same
// result bits). With expert parallelism it also splits, after the plan's groups, each group's
// expert-data subgroups (runtime::expertDataGroup), and the expert group, whose all-to-all-v
// is one NCCL group of a send and a receive per member, on a communicator per pass (forwards,
// backwards), enqueued on the stream the backend names: the compute stream, or in a paired
// step the pass's own.
//
// A Work completes when the event recorded after its NCCL calls has passed; while it has not,
// test() polls the communicators' asynchronous errors, so a broken connection is an error
// rather than a wait. A peer that stops without an error is caught by the executor's
// watchdog, after which the caller aborts the communicators instead of destroying them.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_RUNTIME_BACKEND_CUDA_NCCLTRANSPORT_H
#define CONDUIT_RUNTIME_BACKEND_CUDA_NCCLTRANSPORT_H

#include "runtime/exec/Mpi.h"
#include "runtime/exec/Transport.h"
#include "runtime/plan/Plan.h"

#include <nccl.h>

#include <array>

namespace conduit::cuda {

class NcclTransport final : public runtime::Transport {
public:
  /// Every process of `world` calls it together, with the device already selected.
  static absl::StatusOr<std::unique_ptr<NcclTransport>> create(const runtime::Plan &plan,
                                                               const runtime::MpiWorld &world);
  ~NcclTransport() override;

  using Element = runtime::Element;
  using StreamHandle = runtime::StreamHandle;
  using Work = runtime::Work;

  absl::StatusOr<std::unique_ptr<Work>>
  exchange(const std::vector<runtime::PeerTransfer> &transfers, StreamHandle stream) override;
  absl::StatusOr<std::unique_ptr<Work>> allGather(int32_t group, Element type, const void *shard,
                                                  void *full, int64_t count,
                                                  StreamHandle stream) override;
  absl::StatusOr<std::unique_ptr<Work>> reduceScatter(int32_t group, Element type, const void *full,
                                                      void *shard, int64_t count,
                                                      StreamHandle stream) override;
  absl::StatusOr<std::unique_ptr<Work>> allReduce(int32_t group, Element type, void *data,
                                                  int64_t count, StreamHandle stream) override;
  /// Enqueued on `stream` (null Work), on the tensor communicator of `pass`, as the expert
  /// all-to-alls below; `post` changes nothing.
  absl::StatusOr<std::unique_ptr<Work>> tensorAllReduce(runtime::GroupPass pass, bool post,
                                                        float *data, int64_t count,
                                                        model::Reduction op,
                                                        StreamHandle stream) override;
  absl::StatusOr<std::unique_ptr<Work>> tensorAllGather(runtime::GroupPass pass, bool post,
                                                        const float *shard, float *full,
                                                        int64_t count,
                                                        StreamHandle stream) override;
  absl::StatusOr<std::unique_ptr<Work>> tensorReduceScatter(runtime::GroupPass pass, bool post,
                                                            const float *full, float *shard,
                                                            int64_t count,
                                                            StreamHandle stream) override;
  /// Enqueued on `stream` (null Work), on the communicator of `pass`: a member whose paired
  /// step posts a forward's and a backward's all-to-alls on two streams, interleaved, meets one
  /// that posts them one after the other.
  absl::StatusOr<std::unique_ptr<Work>>
  expertAllToAll(runtime::GroupPass pass, const float *send, const std::vector<int64_t> &sendCounts,
                 float *recv, const std::vector<int64_t> &recvCounts, StreamHandle stream) override;
  /// Over MPI: a host value, once a step.
  absl::StatusOr<double> sumOverRanks(double value) override {
    return runtime::sumOverWorld(value);
  }
  void abort() override;

private:
  NcclTransport() = default;
  absl::StatusOr<ncclComm_t> groupComm(int32_t group) const;
  /// The Work of what was just enqueued on `stream` through `comm`.
  absl::StatusOr<std::unique_ptr<Work>> completion(ncclComm_t comm, cudaStream_t stream);

  ncclComm_t world = nullptr;
  /// Per plan group, then per plan group's expert-data subgroup (expertDataGroup); null where
  /// this rank is not a member.
  std::vector<ncclComm_t> groups;
  /// This rank's tensor group (T > 1), by tensor rank: one communicator per pass.
  std::array<ncclComm_t, runtime::kGroupPasses> tensors{};
  /// This rank's expert group (E > 1), by position: one communicator per pass.
  std::array<ncclComm_t, runtime::kGroupPasses> experts{};
  /// The asynchronous error of `comm` (the tensor or the expert group), if any; `what` names
  /// the group when it does not exist.
  static absl::Status commStatus(ncclComm_t comm, const char *what);
  bool aborted = false;
};

} // namespace conduit::cuda

#endif // CONDUIT_RUNTIME_BACKEND_CUDA_NCCLTRANSPORT_H
