//===- LoopbackTransport.h - every rank a thread of one process -*- C++ -*-===//
//
// The ranks of a plan can run as threads of one process (conduit-run --ranks-per-process):
// on the CPU without MPI processes, and on one GPU, where NCCL refuses two ranks per device.
// They meet in a LoopbackHub, whose transports match what the ranks post. Nothing blocks but
// sumOverRanks: a transfer or collective is posted, and completes in a later test() once its
// peers have posted too, which keeps the plan's deadlock-freedom argument (every stream
// progresses on its own).
//
// - Point-to-point: the k-th send from a to b matches the k-th receive of b from a. Once the
//   send is posted, the receiver orders its stream after the sender's data and copies it;
//   the sender's side completes once its stream is ordered after that copy, so it may reuse
//   the buffer.
// - Collectives: the k-th collective of each member of a group match (a plan group's members
//   are the replicas of one tensor rank, an expert-data subgroup's those of them holding the
//   same experts; a tensor group's, its tensor ranks, whose collectives
//   the layers issue inside their compute and which wait here until done; an expert group's
//   all-to-alls, matched per pass, are posted and polled like the others). Once all have posted,
//   each member computes its own result from every member's input, adding them in member
//   order (the same bits on every member, and the single-process reference's on the CPU,
//   whose double accumulators make the order immaterial in practice), then waits until every
//   member has done so before its inputs may change. An all-reduce, and a reduce-scatter into
//   the member's own block of its input, compute into a temporary, since they work in place.
// - A failed rank aborts the hub, and every other rank's next call fails at once.
//
// The hub knows nothing of where the bytes live. A LoopbackMemory moves and adds them and
// orders the ranks' streams: HostLoopbackMemory (below) in host memory, where everything
// happens at once; the CUDA backend's on the device, with copies and add kernels enqueued on
// streams and events between them.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_RUNTIME_EXEC_LOOPBACKTRANSPORT_H
#define CONDUIT_RUNTIME_EXEC_LOOPBACKTRANSPORT_H

#include "runtime/exec/Transport.h"
#include "runtime/plan/Plan.h"

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>

namespace conduit::runtime {

/// How a loopback hub moves data: every call is ordered on `stream` (the caller's stream;
/// ignored in host memory) and may complete later, as the stream runs. The hub calls it with
/// its lock held, from any rank's thread.
class LoopbackMemory {
public:
  /// A point in a stream's work (an event on a device; nothing in host memory, where work
  /// completes as it is issued). Released when the last owner drops it.
  using Fence = std::shared_ptr<void>;

  virtual ~LoopbackMemory() = default;
  /// The point `stream` has reached.
  virtual absl::StatusOr<Fence> record(StreamHandle stream) = 0;
  /// Orders later work on `stream` after `fence`.
  virtual absl::Status wait(StreamHandle stream, const Fence &fence) = 0;
  /// to[0, count) = from[0, count).
  virtual absl::Status copy(Element type, int64_t count, const void *from, void *to,
                            StreamHandle stream) = 0;
  /// to[i] += from[i] for i in [0, count).
  virtual absl::Status add(Element type, int64_t count, const void *from, void *to,
                           StreamHandle stream) = 0;
  /// to[i] = max(to[i], from[i]) for i in [0, count).
  virtual absl::Status maximum(Element type, int64_t count, const void *from, void *to,
                               StreamHandle stream) = 0;
  /// `bytes` of scratch that `stream` writes first and uses last.
  virtual absl::StatusOr<void *> allocate(int64_t bytes, StreamHandle stream) = 0;
  virtual absl::Status release(void *scratch, StreamHandle stream) = 0;
};

/// Host memory: memcpy and element-wise adds, done at once.
class HostLoopbackMemory final : public LoopbackMemory {
public:
  absl::StatusOr<Fence> record(StreamHandle) override { return Fence(); }
  absl::Status wait(StreamHandle, const Fence &) override { return absl::OkStatus(); }
  absl::Status copy(Element type, int64_t count, const void *from, void *to,
                    StreamHandle stream) override;
  absl::Status add(Element type, int64_t count, const void *from, void *to,
                   StreamHandle stream) override;
  absl::Status maximum(Element type, int64_t count, const void *from, void *to,
                       StreamHandle stream) override;
  absl::StatusOr<void *> allocate(int64_t bytes, StreamHandle stream) override;
  absl::Status release(void *scratch, StreamHandle stream) override;
};

class LoopbackHub {
public:
  /// The hub of `plan`'s ranks, moving data with `memory`; sumOverRanks gives up after
  /// `timeoutS`. `plan` outlives the hub.
  LoopbackHub(const Plan &plan, double timeoutS, std::unique_ptr<LoopbackMemory> memory);
  ~LoopbackHub();

  /// The transport of global rank `rank` (one per thread).
  std::unique_ptr<Transport> transport(int64_t rank);
  /// Makes every pending and later operation fail (a rank failed).
  void abort();

private:
  friend class LoopbackTransport;
  struct Message;
  struct Collective;

  const Plan &plan;
  double timeoutS;
  std::unique_ptr<LoopbackMemory> memory;
  std::mutex mutex;
  std::atomic<bool> aborted{false};
  /// Point-to-point, per (sender, receiver): messages by sequence number.
  struct Channel {
    int64_t sends = 0, receives = 0;
    std::map<int64_t, std::shared_ptr<Message>> messages;
  };
  std::map<std::pair<int64_t, int64_t>, Channel> channels;
  /// Collectives, per plan group and tensor rank (group · T + tensor rank), then per tensor
  /// group and pass (after those, by (pipeline rank · D + replica) · passes + pass): calls by
  /// sequence number, and each member's next number.
  struct GroupState {
    std::vector<int64_t> issued;
    std::map<int64_t, std::shared_ptr<Collective>> calls;
  };
  std::vector<GroupState> groups;
  /// Where the expert groups' slots start in `groups` (one per expert group, by
  /// ExpertPlace::group, and pass), and the expert-data subgroups' (per plan group, E of them by
  /// expertDataPlaceOf's group).
  int64_t expertSlots = 0, expertDataSlots = 0;
  /// sumOverRanks: one slot per rank, summed in rank order.
  std::condition_variable arrived;
  std::vector<double> values;
  int64_t present = 0, generation = 0;
  double lastSum = 0;
};

} // namespace conduit::runtime

#endif // CONDUIT_RUNTIME_EXEC_LOOPBACKTRANSPORT_H
