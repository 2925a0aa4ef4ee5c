//===- MpiTransport.h - ranks in separate processes, over MPI ---*- C++ -*-===//
//
// The transport of the CPU backend: one MPI process per rank. Transfers are MPI_Isend and
// MPI_Irecv on a duplicate of the world communicator (a plan batch is one Work of several
// requests); the data-parallel collectives are non-blocking MPI collectives on one
// communicator per plan group and tensor rank, ranked by replica. A Work completes when
// MPI_Testall says so. The tensor group's collectives run on a communicator of the group,
// ranked by tensor rank, and block: every member gathers every member's data and reduces it
// in tensor-rank order in double precision, so that all compute the same bits. The expert
// group's all-to-alls are MPI_Ialltoallv on a communicator of the group per pass (forward,
// backward), ranked by position. Data lives in host memory; streams are ignored.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_RUNTIME_EXEC_MPITRANSPORT_H
#define CONDUIT_RUNTIME_EXEC_MPITRANSPORT_H

#include "runtime/exec/Mpi.h"
#include "runtime/exec/Transport.h"
#include "runtime/plan/Plan.h"

#include <array>

namespace conduit::runtime {

class MpiTransport final : public Transport {
public:
  /// Every process of `world` calls it together.
  static absl::StatusOr<std::unique_ptr<MpiTransport>> create(const Plan &plan,
                                                              const MpiWorld &world);
  ~MpiTransport() override;

  absl::StatusOr<std::unique_ptr<Work>> exchange(const std::vector<PeerTransfer> &transfers,
                                                 StreamHandle stream) override;
  absl::StatusOr<std::unique_ptr<Work>> allGather(int32_t group, Element type, const void *shard,
                                                  void *full, int64_t count,
                                                  StreamHandle stream) override;
  absl::StatusOr<std::unique_ptr<Work>> reduceScatter(int32_t group, Element type, const void *full,
                                                      void *shard, int64_t count,
                                                      StreamHandle stream) override;
  absl::StatusOr<std::unique_ptr<Work>> allReduce(int32_t group, Element type, void *data,
                                                  int64_t count, StreamHandle stream) override;
  absl::StatusOr<std::unique_ptr<Work>> tensorAllReduce(GroupPass pass, bool post, float *data,
                                                        int64_t count, model::Reduction op,
                                                        StreamHandle stream) override;
  absl::StatusOr<std::unique_ptr<Work>> tensorAllGather(GroupPass pass, bool post,
                                                        const float *shard, float *full,
                                                        int64_t count,
                                                        StreamHandle stream) override;
  absl::StatusOr<std::unique_ptr<Work>> tensorReduceScatter(GroupPass pass, bool post,
                                                            const float *full, float *shard,
                                                            int64_t count,
                                                            StreamHandle stream) override;
  absl::StatusOr<std::unique_ptr<Work>>
  expertAllToAll(GroupPass pass, const float *send, const std::vector<int64_t> &sendCounts,
                 float *recv, const std::vector<int64_t> &recvCounts, StreamHandle stream) override;
  absl::StatusOr<double> sumOverRanks(double value) override { return sumOverWorld(value); }
  /// MPI has no way to cancel collectives; the caller ends the job (MPI_Abort).
  void abort() override {}

private:
  MpiTransport() = default;
  absl::StatusOr<MPI_Comm> groupComm(int32_t group) const;
  /// A non-blocking collective of `count` elements on `group`'s communicator: `post` starts
  /// it with the communicator, the count and the request that completes it.
  template <typename Post>
  absl::StatusOr<std::unique_ptr<Work>> groupCollective(int32_t group, int64_t count, Post post);

  MPI_Comm peers = MPI_COMM_NULL;
  /// Per plan group, then per plan group's expert-data subgroup (expertDataGroup);
  /// MPI_COMM_NULL where not a member.
  std::vector<MPI_Comm> groups;
  /// This rank's tensor group (T > 1), by tensor rank, once per pass.
  std::array<MPI_Comm, kGroupPasses> tensors{MPI_COMM_NULL, MPI_COMM_NULL};
  int tensorSize = 1;
  /// This rank's expert group (E > 1), by position, once per pass.
  std::array<MPI_Comm, kGroupPasses> experts{MPI_COMM_NULL, MPI_COMM_NULL};
};

} // namespace conduit::runtime

#endif // CONDUIT_RUNTIME_EXEC_MPITRANSPORT_H
