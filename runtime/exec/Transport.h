//===- Transport.h - how ranks exchange data --------------------*- C++ -*-===//
//
// Every backend moves bytes through a Transport: MPI between CPU processes, NCCL between GPU
// processes, or the loopback transport (LoopbackTransport.h) between ranks that run as threads
// of one process, on the CPU or on one GPU (NCCL refuses two ranks on one device). A call posts the
// data movement and returns Work that the backend polls; nothing blocks but sumOverRanks. Device
// transports enqueue on the caller's stream: when a Work completes, everything later on that stream
// is ordered after the data movement, so the executor's events order the other streams as they do
// on the CPU. Host transports ignore the stream.
//
// Ranks are global ranks; a group is a plan group (the data-parallel replicas of a stage that
// share this rank's tensor rank), where a rank's position is its replica index, or with expert
// parallelism the expert-data subgroup of one (expertDataGroup below). Inputs and outputs of a
// collective do not overlap, except the one buffer of an all-reduce and a reduce-scatter in
// place, whose shard is the member's own block of `full` (full + position · count).
//
// With tensor parallelism the layers also communicate inside their compute, in this rank's
// tensor group (the T ranks of its pipeline rank and replica, positioned by tensor rank): the
// tensor collectives below return once done on the host and are enqueued on `stream` on a
// device, and every member computes the same bits. With expert parallelism the mixture of
// experts exchanges tokens in this rank's expert group (Config::expertGroupOf): its
// all-to-alls are posted and return Work, so that a compute can stop at one while the compute
// paired with it runs (BackendCore's paired steps).
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_RUNTIME_EXEC_TRANSPORT_H
#define CONDUIT_RUNTIME_EXEC_TRANSPORT_H

#include "runtime/Status.h"
#include "runtime/model/TensorGroup.h"
#include "runtime/plan/Plan.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

namespace conduit::runtime {

/// With the routed experts apart (Plan::expertsApart), the group that reduces and shards a
/// stage's routed experts: the members of plan group `group` that hold the caller's experts
/// (its expert-data group, expertDataPlaceOf in StageWork.h), positioned as there. Transports
/// number these after the plan's groups; a transport without them refuses the number as an
/// unknown group.
inline int32_t expertDataGroup(const Plan &plan, int32_t group) {
  return static_cast<int32_t>(plan.groups.size()) + group;
}

/// The element type of the data a transport moves: activations are float; gradients
/// accumulate in double on the CPU (see BackendCore.h) and in float on devices.
enum class Element { Float32, Float64 };

template <typename T> constexpr Element elementOf();
template <> constexpr Element elementOf<float>() { return Element::Float32; }
template <> constexpr Element elementOf<double>() { return Element::Float64; }
inline int64_t elementBytes(Element e) { return e == Element::Float32 ? 4 : 8; }

/// The device stream a transfer is ordered on (a cudaStream_t on CUDA); host transports
/// ignore it.
using StreamHandle = void *;

/// Data movement in flight.
class Work {
public:
  virtual ~Work() = default;
  /// Whether it completed (as far as the caller's stream is concerned); never blocks.
  virtual absl::StatusOr<bool> test() = 0;
};

/// Work that completes once both `first` and `second` have (`first` may be null: then
/// `second`).
inline std::unique_ptr<Work> joinWork(std::unique_ptr<Work> first, std::unique_ptr<Work> second) {
  class Joint final : public Work {
  public:
    Joint(std::unique_ptr<Work> a, std::unique_ptr<Work> b) : a(std::move(a)), b(std::move(b)) {}
    absl::StatusOr<bool> test() override {
      for (std::unique_ptr<Work> *w : {&a, &b})
        if (*w) {
          CONDUIT_ASSIGN_OR_RETURN(bool done, (*w)->test());
          if (!done)
            return false;
          w->reset();
        }
      return true;
    }

  private:
    std::unique_ptr<Work> a, b;
  };
  if (!first)
    return second;
  return std::make_unique<Joint>(std::move(first), std::move(second));
}

/// Which computes a collective inside a compute belongs to (an expert all-to-all, a tensor
/// collective): forwards, or backwards (whole, input or weight gradient). Each pass's are
/// matched on their own (Transport::expertAllToAll, Transport::tensorAllReduce), so that the
/// two halves of a paired step, a forward and a backward, may interleave theirs.
enum class GroupPass : uint8_t { Forward, Backward };
constexpr int kGroupPasses = 2;

/// One side of a point-to-point transfer of `count` floats.
struct PeerTransfer {
  bool send = true;
  int64_t peer = 0; ///< global rank
  float *data = nullptr;
  int64_t count = 0;
};

class Transport {
public:
  virtual ~Transport() = default;

  /// Posts transfers that belong together (a plan batch) on `stream`.
  virtual absl::StatusOr<std::unique_ptr<Work>> exchange(const std::vector<PeerTransfer> &transfers,
                                                         StreamHandle stream) = 0;
  /// full[r · count, (r + 1) · count) = shard of the member at position r.
  virtual absl::StatusOr<std::unique_ptr<Work>> allGather(int32_t group, Element type,
                                                          const void *shard, void *full,
                                                          int64_t count, StreamHandle stream) = 0;
  /// shard = Σ over members of their full[position · count, (position + 1) · count).
  virtual absl::StatusOr<std::unique_ptr<Work>> reduceScatter(int32_t group, Element type,
                                                              const void *full, void *shard,
                                                              int64_t count,
                                                              StreamHandle stream) = 0;
  /// data = Σ over members of their data, in place.
  virtual absl::StatusOr<std::unique_ptr<Work>> allReduce(int32_t group, Element type, void *data,
                                                          int64_t count, StreamHandle stream) = 0;
  /// A collective of the tensor group on float data (model::TensorGroup's meaning), of a
  /// compute of `pass`. The Work completes once the output holds the result and the input may
  /// change; a null Work means it is done, or ordered on `stream` (device transports), with
  /// nothing for the host to wait for. Without `post` a host transport may run it to its end
  /// before returning (MPI's blocking collectives, faster than non-blocking ones polled to
  /// theirs); every member calls each collective with the same `post`. Members match each
  /// pass's collectives in the order they call them, the two passes apart, so that a paired
  /// step's halves may interleave theirs. A transport without tensor groups refuses them.
  virtual absl::StatusOr<std::unique_ptr<Work>> tensorAllReduce(GroupPass pass, bool post,
                                                                float *data, int64_t count,
                                                                model::Reduction op,
                                                                StreamHandle stream) {
    return absl::UnimplementedError("this transport has no tensor groups");
  }
  virtual absl::StatusOr<std::unique_ptr<Work>> tensorAllGather(GroupPass pass, bool post,
                                                                const float *shard, float *full,
                                                                int64_t count,
                                                                StreamHandle stream) {
    return absl::UnimplementedError("this transport has no tensor groups");
  }
  virtual absl::StatusOr<std::unique_ptr<Work>> tensorReduceScatter(GroupPass pass, bool post,
                                                                    const float *full, float *shard,
                                                                    int64_t count,
                                                                    StreamHandle stream) {
    return absl::UnimplementedError("this transport has no tensor groups");
  }
  /// Posts the expert group's all-to-all-v of float data (model::ExpertGroup's meaning: counts
  /// per member, in elements). The Work completes once `recv` holds the data and `send` may
  /// change; a null Work means the data movement is ordered on `stream` (device transports),
  /// with nothing for the host to wait for. The counts must live until it completes. Members
  /// match each pass's all-to-alls in the order they post them, the two passes apart, so a
  /// rank may interleave a paired forward's and backward's all-to-alls in any order. A
  /// transport without expert groups refuses it.
  virtual absl::StatusOr<std::unique_ptr<Work>>
  expertAllToAll(GroupPass pass, const float *send, const std::vector<int64_t> &sendCounts,
                 float *recv, const std::vector<int64_t> &recvCounts, StreamHandle stream) {
    return absl::UnimplementedError("this transport has no expert groups");
  }
  /// The sum of `value` over every rank of the job (blocking; all ranks call it together).
  virtual absl::StatusOr<double> sumOverRanks(double value) = 0;
  /// Tears communication down without waiting for peers (after an error).
  virtual void abort() = 0;
};

/// Makes a backend's transport once the plan is known (every rank calls it together).
using TransportFactory = std::function<absl::StatusOr<std::unique_ptr<Transport>>(const Plan &)>;

} // namespace conduit::runtime

#endif // CONDUIT_RUNTIME_EXEC_TRANSPORT_H
