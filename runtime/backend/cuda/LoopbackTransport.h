//===- LoopbackTransport.h - several ranks on one GPU -----------*- C++ -*-===//
//
// NCCL refuses two ranks on one device, so for testing whole pipelines on a single GPU the
// ranks run as threads of one process and meet in a LoopbackHub. Nothing blocks: a transfer
// or collective is posted, and completes in a later test() once its peers have posted too,
// which keeps the plan's deadlock-freedom argument (every stream progresses on its own).
//
// - Point-to-point: the k-th send from a to b matches the k-th receive of b from a. The
//   receiver, once the send is posted, orders its stream after the sender's data (an event
//   the sender recorded), copies device to device, and records an event that the sender's
//   stream waits for before it reuses the buffer.
// - Collectives: the k-th collective of each member of a group match. Once all have posted,
//   each member computes its own result on its own stream from every member's input (the
//   same summation order on every member), then waits until every member has done so before
//   its inputs may change. An all-reduce goes through a temporary, since it works in place.
// - A failed rank aborts the hub, and every other rank's next test() fails at once.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_RUNTIME_BACKEND_CUDA_LOOPBACKTRANSPORT_H
#define CONDUIT_RUNTIME_BACKEND_CUDA_LOOPBACKTRANSPORT_H

#include "runtime/exec/Transport.h"
#include "runtime/plan/Plan.h"

#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>

namespace conduit::cuda {

class LoopbackHub {
public:
  /// The hub of a plan's ranks; blocking calls give up after `timeoutS`.
  LoopbackHub(const runtime::Plan &plan, double timeoutS);
  ~LoopbackHub();

  /// The transport of global rank `rank` (one per thread).
  std::unique_ptr<runtime::Transport> transport(int64_t rank);
  /// Makes every pending and later operation fail (a rank failed).
  void abort();

private:
  friend class LoopbackTransport;
  struct Message;
  struct Collective;

  const runtime::Plan &plan;
  double timeoutS;
  std::mutex mutex;
  std::atomic<bool> aborted{false};
  /// Point-to-point, per (sender, receiver): messages by sequence number.
  struct Channel {
    int64_t sends = 0, receives = 0;
    std::map<int64_t, std::shared_ptr<Message>> messages;
  };
  std::map<std::pair<int64_t, int64_t>, Channel> channels;
  /// Collectives, per plan group: calls by sequence number, and each member's next number.
  struct GroupState {
    std::vector<int64_t> issued;
    std::map<int64_t, std::shared_ptr<Collective>> calls;
  };
  std::vector<GroupState> groups;
  /// sumOverRanks: one slot per rank, summed in rank order.
  std::condition_variable arrived;
  std::vector<double> values;
  int64_t present = 0, generation = 0;
  double lastSum = 0;
};

} // namespace conduit::cuda

#endif // CONDUIT_RUNTIME_BACKEND_CUDA_LOOPBACKTRANSPORT_H
