//===- Transfers.h - point-to-point transfers and receive slots -*- C++ -*-===//
//
// The decisions conduit-insert-p2p and conduit-lower-to-plan make about point-to-point
// communication, independent of any IR, so that the passes and the micro-batch search's
// step-time evaluator share one implementation:
//
// * planTransfers: a transfer for every cross-rank dependency of a schedule, merged into each
//   rank's order by one global key (the predicted time its data exists, then a dependency
//   order), and the 1F1B-style exchanges that are issued as one batch.
// * assignReceiveSlots: the receive buffers of a rank's merged order, reused only when the
//   receive would not wait for them.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_SCHEDULING_TRANSFERS_H
#define CONDUIT_SCHEDULING_TRANSFERS_H

#include "scheduling/Schedulers.h"

#include <array>
#include <functional>
#include <optional>
#include <string>
#include <tuple>

namespace conduit::sched {

/// One transfer between stages on different ranks: the samples [begin, end) of the producer's
/// micro-batch that the consumer's micro-batch needs.
struct Transfer {
  bool gradient = false; ///< false: activations forward; true: input gradients backward
  int32_t fromStage = 0, fromMb = 0, toStage = 0, toMb = 0;
  int32_t fromRank = 0, toRank = 0;
  int64_t begin = 0, end = 0, bytes = 0;
  /// How long it takes (the TransferTime of its bytes between its ranks).
  double seconds = 0;
  /// Positions of the producer and the consumer in their ranks' compute orders.
  int64_t producerIndex = 0, consumerIndex = 0;
  /// The ordering key: when its data exists (predicted), then the producer's place in a
  /// dependency-respecting order of all compute.
  double time = 0;
  int64_t sequence = 0;
  int32_t sendBatch = -1, recvBatch = -1;
};

/// One entry of a rank's merged order: a compute action of the schedule, or one side of a
/// transfer.
struct OrderEntry {
  int64_t action = -1;   ///< index into the rank's schedule list
  int64_t transfer = -1; ///< index into TransferPlan::transfers
  bool isSend = false;
};

struct TransferPlan {
  std::vector<Transfer> transfers;
  std::vector<std::vector<OrderEntry>> orders; ///< per rank
};

/// Seconds to move `bytes` from rank `from` to rank `to`.
using TransferTime = std::function<double(int64_t bytes, int32_t from, int32_t to)>;

/// Transfers for every dependency of `schedule` between stages on different ranks, each rank's
/// merged order, and the batched exchanges. `predicted` is the compute-only timeline of the
/// schedule; `outputBytes[s]` the bytes per sample leaving stage s (its input gradient has the
/// same size). Sorting by the global key makes every rank see its transfers in one order, and
/// a transfer a producer depends on sorts before it: the order cannot deadlock for any actual
/// timing. A send and a receive that two neighbours exchange within one transfer time of each
/// other, adjacent on both sides and with no dependency between them, form a batch.
TransferPlan planTransfers(const ScheduleProblem &problem, const Schedule &schedule,
                           const Timeline &predicted, const std::vector<int64_t> &outputBytes,
                           const TransferTime &transferTime);
/// planTransfers for evaluators that plan thousands of times: the result and the working
/// memory are reused from one call to the next.
class TransferPlanner {
public:
  const TransferPlan &plan(const ScheduleProblem &problem, const Schedule &schedule,
                           const Timeline &predicted, const std::vector<int64_t> &outputBytes,
                           const TransferTime &transferTime);

  /// Working memory (no meaning between calls).
  struct Scratch {
    std::vector<std::vector<std::pair<int32_t, int64_t>>> forwardAt, backwardAt;
    std::vector<int64_t> outgoing, outgoingIndices;
    std::vector<std::vector<std::vector<int64_t>>> incoming;
    std::vector<std::vector<const OrderEntry *>> p2p;
    std::vector<std::array<int64_t, 2>> position;
    std::vector<int32_t> nextBatch;
  };

private:
  TransferPlan result;
  Scratch scratch;
};

//===----------------------------------------------------------------------===//
// Receive slots
//===----------------------------------------------------------------------===//

/// What slot assignment needs of one item of a rank's order.
struct SlotItem {
  enum class Kind : uint8_t { Compute, Receive, OtherTransfer, Other };
  Kind kind = Kind::Other;
  /// Compute and Receive: the consumer's identity, (stage, micro-batch, direction) as one index.
  int64_t key = -1;
  int64_t bytes = 0;  ///< Receive
  int32_t batch = -1; ///< Receive and OtherTransfer
};

struct ReceiveSlots {
  std::vector<int32_t> slotOf;           ///< per item: the slot of a receive or of its consumer
  std::vector<int64_t> previousConsumer; ///< per item: the compute that last read the slot a
                                         ///< receive reuses (its receive must wait), or -1
  std::vector<int64_t> slotBytes;
  /// A malformed order: the offending item and why.
  std::optional<std::pair<int64_t, std::string>> error;
};

/// Every consumer that receives data gets one slot for all its pieces, live from its first
/// receive to itself. Slots are reused (best fit by size, growing if needed) only when the
/// receive would not wait for them: a receive sits in the order where its data is produced, so
/// the compute placed just before it is still running then, and a slot whose last reader is
/// that compute is not free yet (double buffering). A receive is issued with the first
/// transfer of its batch, so that is where its slot must be free.
ReceiveSlots assignReceiveSlots(const std::vector<SlotItem> &items, int64_t numKeys);

/// assignReceiveSlots reusing its result and working memory from one call to the next.
class ReceiveSlotAssigner {
public:
  const ReceiveSlots &assign(const std::vector<SlotItem> &items, int64_t numKeys);

private:
  ReceiveSlots result;
  std::vector<int64_t> runningAt, need, consumerAt, slotFor, lastConsumer;
};

} // namespace conduit::sched

#endif // CONDUIT_SCHEDULING_TRANSFERS_H
