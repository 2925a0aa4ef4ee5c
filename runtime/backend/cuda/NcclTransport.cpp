//===- NcclTransport.cpp - CUDA ranks in separate processes ---------------===//

#include "runtime/backend/cuda/NcclTransport.h"

#include "runtime/backend/cuda/CudaCheck.h"
#include "runtime/backend/cuda/EventWork.h"
#include "runtime/exec/StageWork.h"

#include "absl/strings/str_cat.h"

namespace conduit::cuda {

using runtime::Element;
using runtime::PeerTransfer;
using runtime::StreamHandle;
using runtime::Work;

namespace {

ncclDataType_t ncclType(Element type) { return type == Element::Float32 ? ncclFloat : ncclDouble; }

/// NCCL work on a stream: done when the event recorded after it has passed; until then the
/// communicator's asynchronous errors are reported.
class CommWork final : public EventWork {
public:
  CommWork(cudaEvent_t done, ncclComm_t comm) : EventWork(done), comm(comm) {}

  absl::StatusOr<bool> test() override {
    CONDUIT_ASSIGN_OR_RETURN(bool passed, EventWork::test());
    if (passed)
      return true;
    ncclResult_t async = ncclSuccess;
    CONDUIT_CUDA(ncclCommGetAsyncError(comm, &async));
    if (async != ncclInProgress)
      CONDUIT_CUDA(async);
    return false;
  }

private:
  ncclComm_t comm;
};

} // namespace

absl::StatusOr<std::unique_ptr<NcclTransport>> NcclTransport::create(const runtime::Plan &plan,
                                                                     const runtime::MpiWorld &mpi) {
  std::unique_ptr<NcclTransport> t(new NcclTransport());
  // Rank 0 sends the id or its failure: the others must not wait for an id that never comes.
  struct {
    int ok = 1;
    ncclUniqueId id;
  } shared;
  absl::Status made = absl::OkStatus();
  if (mpi.rank == 0) {
    made = checkResult(ncclGetUniqueId(&shared.id), "ncclGetUniqueId", __FILE__, __LINE__);
    shared.ok = made.ok();
  }
  CONDUIT_MPI(MPI_Bcast(&shared, sizeof(shared), MPI_BYTE, 0, MPI_COMM_WORLD));
  CONDUIT_RETURN_IF_ERROR(made);
  if (!shared.ok)
    return absl::UnavailableError("rank 0 could not create the NCCL unique id");
  CONDUIT_CUDA(ncclCommInitRank(&t->world, mpi.size, shared.id, mpi.rank));
  // Splits are collective over the world communicator: every rank takes part in each.
  const runtime::RankPosition where = runtime::RankPosition::of(plan.config, mpi.rank);
  t->groups.assign(plan.groups.size(), nullptr);
  for (size_t g = 0; g < plan.groups.size(); ++g) {
    const bool member = plan.groups[g].ranks[0] == where.pipelineRank;
    CONDUIT_CUDA(ncclCommSplit(t->world, member ? where.tensorRank : NCCL_SPLIT_NOCOLOR,
                               where.replica, &t->groups[g], nullptr));
  }
  // With the routed experts apart, each group's expert-data subgroups, numbered after the
  // plan's groups: the members holding the same experts, by their position among them.
  if (plan.expertsApart()) {
    const runtime::ExpertPlace data = runtime::expertDataPlaceOf(plan.config, where);
    for (size_t g = 0; g < plan.groups.size(); ++g) {
      const bool member = plan.groups[g].ranks[0] == where.pipelineRank;
      ncclComm_t &comm = t->groups.emplace_back(nullptr);
      CONDUIT_CUDA(ncclCommSplit(t->world,
                                 member ? static_cast<int>(data.group) : NCCL_SPLIT_NOCOLOR,
                                 static_cast<int>(data.position), &comm, nullptr));
    }
  }
  if (plan.config.expert > 1) {
    // The expert group: E ranks of this pipeline rank, by position, once per pass.
    const runtime::ExpertPlace place = runtime::expertPlaceOf(plan.config, where);
    for (ncclComm_t &comm : t->experts)
      CONDUIT_CUDA(ncclCommSplit(t->world, static_cast<int>(place.group),
                                 static_cast<int>(place.position), &comm, nullptr));
  }
  // The tensor group: the ranks of this pipeline rank and replica, by tensor rank, once per
  // pass.
  if (plan.config.tensor > 1)
    for (ncclComm_t &comm : t->tensors)
      CONDUIT_CUDA(ncclCommSplit(t->world, static_cast<int>(mpi.rank / plan.config.tensor),
                                 where.tensorRank, &comm, nullptr));
  return t;
}

NcclTransport::~NcclTransport() {
  if (aborted)
    return;
  absl::Status ignored;
  for (ncclComm_t c : groups)
    if (c)
      CONDUIT_CUDA_NOTE(ignored, ncclCommDestroy(c));
  for (ncclComm_t c : {tensors[0], tensors[1], experts[0], experts[1]})
    if (c)
      CONDUIT_CUDA_NOTE(ignored, ncclCommDestroy(c));
  if (world)
    CONDUIT_CUDA_NOTE(ignored, ncclCommDestroy(world));
}

void NcclTransport::abort() {
  if (aborted)
    return;
  aborted = true;
  absl::Status ignored;
  for (ncclComm_t c : groups)
    if (c)
      CONDUIT_CUDA_NOTE(ignored, ncclCommAbort(c));
  for (ncclComm_t c : {tensors[0], tensors[1], experts[0], experts[1]})
    if (c)
      CONDUIT_CUDA_NOTE(ignored, ncclCommAbort(c));
  if (world)
    CONDUIT_CUDA_NOTE(ignored, ncclCommAbort(world));
}

absl::StatusOr<ncclComm_t> NcclTransport::groupComm(int32_t group) const {
  if (group < 0 || group >= static_cast<int32_t>(groups.size()) || !groups[group])
    return absl::InternalError(absl::StrCat("this rank is not a member of group ", group));
  return groups[group];
}

absl::StatusOr<std::unique_ptr<Work>> NcclTransport::completion(ncclComm_t comm,
                                                                cudaStream_t stream) {
  CONDUIT_ASSIGN_OR_RETURN(std::unique_ptr<CommWork> work,
                           EventWork::after<CommWork>(stream, comm));
  return work;
}

absl::StatusOr<std::unique_ptr<Work>>
NcclTransport::exchange(const std::vector<PeerTransfer> &transfers, StreamHandle handle) {
  cudaStream_t stream = static_cast<cudaStream_t>(handle);
  // The transfers of a batch are one NCCL group: posted together, so that two ranks that
  // send to each other at the same moment cannot block each other.
  CONDUIT_CUDA(ncclGroupStart());
  absl::Status posted;
  for (const PeerTransfer &t : transfers) {
    if (t.send)
      CONDUIT_CUDA_NOTE(
          posted, ncclSend(t.data, t.count, ncclFloat, static_cast<int>(t.peer), world, stream));
    else
      CONDUIT_CUDA_NOTE(
          posted, ncclRecv(t.data, t.count, ncclFloat, static_cast<int>(t.peer), world, stream));
  }
  CONDUIT_CUDA_NOTE(posted, ncclGroupEnd());
  CONDUIT_RETURN_IF_ERROR(posted);
  return completion(world, stream);
}

absl::StatusOr<std::unique_ptr<Work>> NcclTransport::allGather(int32_t group, Element type,
                                                               const void *shard, void *full,
                                                               int64_t count, StreamHandle handle) {
  cudaStream_t stream = static_cast<cudaStream_t>(handle);
  CONDUIT_ASSIGN_OR_RETURN(ncclComm_t comm, groupComm(group));
  CONDUIT_CUDA(ncclAllGather(shard, full, count, ncclType(type), comm, stream));
  return completion(comm, stream);
}

absl::StatusOr<std::unique_ptr<Work>> NcclTransport::reduceScatter(int32_t group, Element type,
                                                                   const void *full, void *shard,
                                                                   int64_t count,
                                                                   StreamHandle handle) {
  cudaStream_t stream = static_cast<cudaStream_t>(handle);
  CONDUIT_ASSIGN_OR_RETURN(ncclComm_t comm, groupComm(group));
  CONDUIT_CUDA(ncclReduceScatter(full, shard, count, ncclType(type), ncclSum, comm, stream));
  return completion(comm, stream);
}

absl::StatusOr<std::unique_ptr<Work>> NcclTransport::allReduce(int32_t group, Element type,
                                                               void *data, int64_t count,
                                                               StreamHandle handle) {
  cudaStream_t stream = static_cast<cudaStream_t>(handle);
  CONDUIT_ASSIGN_OR_RETURN(ncclComm_t comm, groupComm(group));
  CONDUIT_CUDA(ncclAllReduce(data, data, count, ncclType(type), ncclSum, comm, stream));
  return completion(comm, stream);
}

absl::Status NcclTransport::commStatus(ncclComm_t comm, const char *what) {
  if (!comm)
    return absl::InternalError(absl::StrCat("this rank has no ", what));
  ncclResult_t async = ncclSuccess;
  CONDUIT_CUDA(ncclCommGetAsyncError(comm, &async));
  CONDUIT_CUDA(async);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Work>> NcclTransport::tensorAllReduce(runtime::GroupPass pass, bool,
                                                                     float *data, int64_t count,
                                                                     model::Reduction op,
                                                                     StreamHandle stream) {
  ncclComm_t comm = tensors[static_cast<int>(pass)];
  CONDUIT_RETURN_IF_ERROR(commStatus(comm, "tensor group"));
  CONDUIT_CUDA(ncclAllReduce(data, data, count, ncclFloat,
                             op == model::Reduction::Sum ? ncclSum : ncclMax, comm,
                             static_cast<cudaStream_t>(stream)));
  return nullptr;
}

absl::StatusOr<std::unique_ptr<Work>> NcclTransport::tensorAllGather(runtime::GroupPass pass, bool,
                                                                     const float *shard,
                                                                     float *full, int64_t count,
                                                                     StreamHandle stream) {
  ncclComm_t comm = tensors[static_cast<int>(pass)];
  CONDUIT_RETURN_IF_ERROR(commStatus(comm, "tensor group"));
  CONDUIT_CUDA(
      ncclAllGather(shard, full, count, ncclFloat, comm, static_cast<cudaStream_t>(stream)));
  return nullptr;
}

absl::StatusOr<std::unique_ptr<Work>>
NcclTransport::tensorReduceScatter(runtime::GroupPass pass, bool, const float *full, float *shard,
                                   int64_t count, StreamHandle stream) {
  ncclComm_t comm = tensors[static_cast<int>(pass)];
  CONDUIT_RETURN_IF_ERROR(commStatus(comm, "tensor group"));
  CONDUIT_CUDA(ncclReduceScatter(full, shard, count, ncclFloat, ncclSum, comm,
                                 static_cast<cudaStream_t>(stream)));
  return nullptr;
}

absl::StatusOr<std::unique_ptr<Work>>
NcclTransport::expertAllToAll(runtime::GroupPass pass, const float *send,
                              const std::vector<int64_t> &sendCounts, float *recv,
                              const std::vector<int64_t> &recvCounts, StreamHandle handle) {
  ncclComm_t comm = experts[static_cast<int>(pass)];
  CONDUIT_RETURN_IF_ERROR(commStatus(comm, "expert group"));
  cudaStream_t stream = static_cast<cudaStream_t>(handle);
  // One NCCL group: every member's sends and receives posted together, so that no pair of
  // members waits for the other (NCCL's all-to-all-v idiom). Nothing is posted for an empty
  // part; a member's part for itself goes through NCCL too, which copies it.
  CONDUIT_CUDA(ncclGroupStart());
  absl::Status posted;
  int64_t sentAt = 0, receivedAt = 0;
  for (size_t j = 0; j < sendCounts.size(); ++j) {
    const int peer = static_cast<int>(j);
    if (sendCounts[j] > 0)
      CONDUIT_CUDA_NOTE(posted, ncclSend(send + sentAt, static_cast<size_t>(sendCounts[j]),
                                         ncclFloat, peer, comm, stream));
    if (recvCounts[j] > 0)
      CONDUIT_CUDA_NOTE(posted, ncclRecv(recv + receivedAt, static_cast<size_t>(recvCounts[j]),
                                         ncclFloat, peer, comm, stream));
    sentAt += sendCounts[j];
    receivedAt += recvCounts[j];
  }
  CONDUIT_CUDA_NOTE(posted, ncclGroupEnd());
  CONDUIT_RETURN_IF_ERROR(posted);
  return nullptr;
}

} // namespace conduit::cuda
