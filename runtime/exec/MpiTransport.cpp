//===- MpiTransport.cpp - ranks in separate processes, over MPI -----------===//

#include "runtime/exec/MpiTransport.h"

#include "runtime/exec/StageWork.h"

#include "absl/strings/str_cat.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <functional>
#include <utility>

namespace conduit::runtime {

namespace {

/// MPI requests that complete together.
class MpiWork final : public Work {
public:
  ~MpiWork() override {
    for (MPI_Request &r : requests)
      if (r != MPI_REQUEST_NULL)
        MPI_Request_free(&r);
  }
  absl::StatusOr<bool> test() override {
    int done = 0;
    CONDUIT_MPI(MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done,
                            MPI_STATUSES_IGNORE));
    if (done && finish)
      std::exchange(finish, nullptr)();
    return done != 0;
  }
  std::vector<MPI_Request> requests;
  /// Runs once when every request has completed.
  std::function<void()> finish;
  /// What a non-blocking collective reads until it completes (an all-to-all-v's counts and
  /// displacements).
  std::vector<int> arrays;
  /// What it writes before `finish` reads it (every member's data of a tensor all-reduce or
  /// reduce-scatter).
  std::vector<float> received;
};

MPI_Datatype mpiType(Element type) { return type == Element::Float32 ? MPI_FLOAT : MPI_DOUBLE; }

/// The work of a collective that writes the `members` members' `count` elements each into
/// its `received` (member r's at r · count), which it reduces by `op` in member order, in
/// double, into `out` once done: the same bits on every member.
std::unique_ptr<MpiWork> reducedInMemberOrder(int64_t count, int members, model::Reduction op,
                                              float *out) {
  auto work = std::make_unique<MpiWork>();
  std::vector<float> &parts = work->received;
  parts.resize(static_cast<size_t>(count) * members);
  work->finish = [&parts, count, members, op, out] {
    for (int64_t i = 0; i < count; ++i) {
      double v = parts[i];
      for (int r = 1; r < members; ++r) {
        const double x = parts[r * count + i];
        v = op == model::Reduction::Sum ? v + x : std::max(v, x);
      }
      out[i] = static_cast<float>(v);
    }
  };
  return work;
}

/// A work whose collective already ran (a blocking call), finished now: nothing to wait for.
std::unique_ptr<Work> finished(std::unique_ptr<MpiWork> work) {
  if (work->finish)
    std::exchange(work->finish, nullptr)();
  return nullptr;
}

absl::StatusOr<int> mpiCount(int64_t count) {
  if (count < 0 || count > INT_MAX)
    return absl::OutOfRangeError(absl::StrCat(count, " elements do not fit one MPI call"));
  return static_cast<int>(count);
}

} // namespace

absl::StatusOr<std::unique_ptr<MpiTransport>> MpiTransport::create(const Plan &plan,
                                                                   const MpiWorld &world) {
  std::unique_ptr<MpiTransport> t(new MpiTransport());
  const RankPosition where = RankPosition::of(plan.config, world.rank);
  CONDUIT_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &t->peers));
  CONDUIT_MPI(MPI_Comm_set_errhandler(t->peers, MPI_ERRORS_RETURN));
  // One communicator per group, of its replicas ranked by replica. Every process takes part
  // in every split.
  t->groups.assign(plan.groups.size(), MPI_COMM_NULL);
  // With tensor parallelism, one per group and tensor rank: the replicas of the same part.
  for (size_t g = 0; g < plan.groups.size(); ++g) {
    const bool member = plan.groups[g].ranks[0] == where.pipelineRank;
    CONDUIT_MPI(MPI_Comm_split(MPI_COMM_WORLD, member ? where.tensorRank : MPI_UNDEFINED,
                               where.replica, &t->groups[g]));
    if (member)
      CONDUIT_MPI(MPI_Comm_set_errhandler(t->groups[g], MPI_ERRORS_RETURN));
  }
  // With the routed experts apart, each group's expert-data subgroups (expertDataGroup),
  // numbered after the plan's groups: the members holding the same experts, by their position.
  if (plan.expertsApart()) {
    const ExpertPlace data = expertDataPlaceOf(plan.config, where);
    for (size_t g = 0; g < plan.groups.size(); ++g) {
      const bool member = plan.groups[g].ranks[0] == where.pipelineRank;
      MPI_Comm &comm = t->groups.emplace_back(MPI_COMM_NULL);
      CONDUIT_MPI(MPI_Comm_split(MPI_COMM_WORLD,
                                 member ? static_cast<int>(data.group) : MPI_UNDEFINED,
                                 static_cast<int>(data.position), &comm));
      if (member)
        CONDUIT_MPI(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN));
    }
  }
  // The expert group: E ranks of this pipeline rank, by position.
  if (plan.config.expert > 1) {
    const ExpertPlace place = expertPlaceOf(plan.config, where);
    for (MPI_Comm &comm : t->experts) {
      CONDUIT_MPI(MPI_Comm_split(MPI_COMM_WORLD, static_cast<int>(place.group),
                                 static_cast<int>(place.position), &comm));
      CONDUIT_MPI(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN));
    }
  }
  // The tensor group: the ranks of this pipeline rank and replica, by tensor rank, once per
  // pass.
  t->tensorSize = plan.config.tensor;
  if (t->tensorSize > 1)
    for (MPI_Comm &comm : t->tensors) {
      CONDUIT_MPI(MPI_Comm_split(MPI_COMM_WORLD, static_cast<int>(world.rank / t->tensorSize),
                                 where.tensorRank, &comm));
      CONDUIT_MPI(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN));
    }
  return t;
}

MpiTransport::~MpiTransport() {
  for (MPI_Comm &comm : tensors)
    if (comm != MPI_COMM_NULL)
      MPI_Comm_free(&comm);
  for (MPI_Comm &comm : experts)
    if (comm != MPI_COMM_NULL)
      MPI_Comm_free(&comm);
  for (MPI_Comm &c : groups)
    if (c != MPI_COMM_NULL)
      MPI_Comm_free(&c);
  if (peers != MPI_COMM_NULL)
    MPI_Comm_free(&peers);
}

absl::StatusOr<MPI_Comm> MpiTransport::groupComm(int32_t group) const {
  if (group < 0 || group >= static_cast<int32_t>(groups.size()) || groups[group] == MPI_COMM_NULL)
    return absl::InternalError(absl::StrCat("this process is not a member of group ", group));
  return groups[group];
}

absl::StatusOr<std::unique_ptr<Work>>
MpiTransport::exchange(const std::vector<PeerTransfer> &transfers, StreamHandle) {
  auto work = std::make_unique<MpiWork>();
  work->requests.reserve(transfers.size());
  for (const PeerTransfer &t : transfers) {
    CONDUIT_ASSIGN_OR_RETURN(int count, mpiCount(t.count));
    MPI_Request request;
    if (t.send)
      CONDUIT_MPI(
          MPI_Isend(t.data, count, MPI_FLOAT, static_cast<int>(t.peer), 0, peers, &request));
    else
      CONDUIT_MPI(
          MPI_Irecv(t.data, count, MPI_FLOAT, static_cast<int>(t.peer), 0, peers, &request));
    work->requests.push_back(request);
  }
  return work;
}

template <typename Post>
absl::StatusOr<std::unique_ptr<Work>> MpiTransport::groupCollective(int32_t group, int64_t count,
                                                                    Post post) {
  CONDUIT_ASSIGN_OR_RETURN(MPI_Comm comm, groupComm(group));
  CONDUIT_ASSIGN_OR_RETURN(int n, mpiCount(count));
  auto work = std::make_unique<MpiWork>();
  work->requests.emplace_back();
  CONDUIT_RETURN_IF_ERROR(post(comm, n, &work->requests.back()));
  return work;
}

absl::StatusOr<std::unique_ptr<Work>> MpiTransport::allGather(int32_t group, Element type,
                                                              const void *shard, void *full,
                                                              int64_t count, StreamHandle) {
  return groupCollective(group, count, [&](MPI_Comm comm, int n, MPI_Request *request) {
    CONDUIT_MPI(MPI_Iallgather(shard, n, mpiType(type), full, n, mpiType(type), comm, request));
    return absl::OkStatus();
  });
}

absl::StatusOr<std::unique_ptr<Work>> MpiTransport::reduceScatter(int32_t group, Element type,
                                                                  const void *full, void *shard,
                                                                  int64_t count, StreamHandle) {
  // In place when the shard is this member's block of `full` (ZeRO-1's gradients).
  CONDUIT_ASSIGN_OR_RETURN(MPI_Comm comm, groupComm(group));
  int position = 0;
  CONDUIT_MPI(MPI_Comm_rank(comm, &position));
  const int64_t bytes = count * elementBytes(type);
  char *start = static_cast<char *>(const_cast<void *>(full));
  char *own = start + position * bytes;
  const bool inPlace = shard == own;
  const void *send = inPlace ? MPI_IN_PLACE : full;
  void *recv = inPlace ? start : shard;
  CONDUIT_ASSIGN_OR_RETURN(
      std::unique_ptr<Work> work,
      groupCollective(group, count, [&](MPI_Comm c, int n, MPI_Request *r) {
        CONDUIT_MPI(MPI_Ireduce_scatter_block(send, recv, n, mpiType(type), MPI_SUM, c, r));
        return absl::OkStatus();
      }));
  if (inPlace && position > 0) // MPI leaves the member's sum at the start of the buffer
    static_cast<MpiWork &>(*work).finish = [start, own, bytes] {
      std::memmove(own, start, static_cast<size_t>(bytes));
    };
  return work;
}

absl::StatusOr<std::unique_ptr<Work>>
MpiTransport::allReduce(int32_t group, Element type, void *data, int64_t count, StreamHandle) {
  return groupCollective(group, count, [&](MPI_Comm comm, int n, MPI_Request *request) {
    CONDUIT_MPI(MPI_Iallreduce(MPI_IN_PLACE, data, n, mpiType(type), MPI_SUM, comm, request));
    return absl::OkStatus();
  });
}

absl::StatusOr<std::unique_ptr<Work>> MpiTransport::tensorAllReduce(GroupPass pass, bool post,
                                                                    float *data, int64_t count,
                                                                    model::Reduction op,
                                                                    StreamHandle) {
  // Every member's data, then reduced in member order.
  CONDUIT_ASSIGN_OR_RETURN(int n, mpiCount(count));
  std::unique_ptr<MpiWork> work = reducedInMemberOrder(count, tensorSize, op, data);
  std::vector<float> &all = work->received;
  MPI_Comm comm = tensors[static_cast<int>(pass)];
  if (!post) {
    CONDUIT_MPI(MPI_Allgather(data, n, MPI_FLOAT, all.data(), n, MPI_FLOAT, comm));
    return finished(std::move(work));
  }
  CONDUIT_MPI(MPI_Iallgather(data, n, MPI_FLOAT, all.data(), n, MPI_FLOAT, comm,
                             &work->requests.emplace_back(MPI_REQUEST_NULL)));
  return work;
}

absl::StatusOr<std::unique_ptr<Work>> MpiTransport::tensorAllGather(GroupPass pass, bool post,
                                                                    const float *shard, float *full,
                                                                    int64_t count, StreamHandle) {
  CONDUIT_ASSIGN_OR_RETURN(int n, mpiCount(count));
  MPI_Comm comm = tensors[static_cast<int>(pass)];
  if (!post) {
    CONDUIT_MPI(MPI_Allgather(shard, n, MPI_FLOAT, full, n, MPI_FLOAT, comm));
    return nullptr;
  }
  auto work = std::make_unique<MpiWork>();
  CONDUIT_MPI(MPI_Iallgather(shard, n, MPI_FLOAT, full, n, MPI_FLOAT, comm,
                             &work->requests.emplace_back(MPI_REQUEST_NULL)));
  return work;
}

absl::StatusOr<std::unique_ptr<Work>> MpiTransport::tensorReduceScatter(GroupPass pass, bool post,
                                                                        const float *full,
                                                                        float *shard, int64_t count,
                                                                        StreamHandle) {
  // Member r receives every member's r-th part, then sums them in member order.
  CONDUIT_ASSIGN_OR_RETURN(int n, mpiCount(count));
  std::unique_ptr<MpiWork> work =
      reducedInMemberOrder(count, tensorSize, model::Reduction::Sum, shard);
  std::vector<float> &parts = work->received;
  MPI_Comm comm = tensors[static_cast<int>(pass)];
  if (!post) {
    CONDUIT_MPI(MPI_Alltoall(full, n, MPI_FLOAT, parts.data(), n, MPI_FLOAT, comm));
    return finished(std::move(work));
  }
  CONDUIT_MPI(MPI_Ialltoall(full, n, MPI_FLOAT, parts.data(), n, MPI_FLOAT, comm,
                            &work->requests.emplace_back(MPI_REQUEST_NULL)));
  return work;
}

absl::StatusOr<std::unique_ptr<Work>>
MpiTransport::expertAllToAll(GroupPass pass, const float *send,
                             const std::vector<int64_t> &sendCounts, float *recv,
                             const std::vector<int64_t> &recvCounts, StreamHandle) {
  MPI_Comm comm = experts[static_cast<int>(pass)];
  if (comm == MPI_COMM_NULL)
    return absl::InternalError("this process has no expert group");
  // Counts and displacements, sent and received, in one array that lives with the request.
  const size_t members = sendCounts.size();
  auto work = std::make_unique<MpiWork>();
  std::vector<int> &a = work->arrays;
  a.resize(4 * members);
  int *sent = a.data(), *sentAt = sent + members, *received = sentAt + members,
      *receivedAt = received + members;
  int64_t sentTotal = 0, receivedTotal = 0;
  for (size_t j = 0; j < members; ++j) {
    CONDUIT_ASSIGN_OR_RETURN(sent[j], mpiCount(sendCounts[j]));
    CONDUIT_ASSIGN_OR_RETURN(received[j], mpiCount(recvCounts[j]));
    CONDUIT_ASSIGN_OR_RETURN(sentAt[j], mpiCount(sentTotal));
    CONDUIT_ASSIGN_OR_RETURN(receivedAt[j], mpiCount(receivedTotal));
    sentTotal += sendCounts[j];
    receivedTotal += recvCounts[j];
  }
  MPI_Request &request = work->requests.emplace_back(MPI_REQUEST_NULL);
  CONDUIT_MPI(MPI_Ialltoallv(send, sent, sentAt, MPI_FLOAT, recv, received, receivedAt, MPI_FLOAT,
                             comm, &request));
  return work;
}

} // namespace conduit::runtime
