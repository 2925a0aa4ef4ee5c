//===- LoopbackTransport.cpp - several ranks on one GPU -------------------===//

#include "runtime/backend/cuda/LoopbackTransport.h"

#include "runtime/backend/cuda/CudaCheck.h"
#include "runtime/backend/cuda/Kernels.h"
#include "runtime/exec/StageWork.h"

#include "absl/strings/str_cat.h"

#include <chrono>

namespace conduit::cuda {

using runtime::Element;
using runtime::PeerTransfer;
using runtime::StreamHandle;
using runtime::Transport;
using runtime::Work;

namespace {

absl::StatusOr<cudaEvent_t> recordEvent(cudaStream_t stream) {
  cudaEvent_t event = nullptr;
  CONDUIT_CUDA(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  CONDUIT_CUDA(cudaEventRecord(event, stream));
  return event;
}

void destroyEvent(cudaEvent_t event) {
  absl::Status ignored;
  if (event)
    CONDUIT_CUDA_NOTE(ignored, cudaEventDestroy(event));
}

absl::Status abortedError() { return absl::AbortedError("another rank of this process failed"); }

enum class Kind { AllGather, ReduceScatter, AllReduce };

const char *kindName(Kind k) {
  switch (k) {
  case Kind::AllGather:
    return "all-gather";
  case Kind::ReduceScatter:
    return "reduce-scatter";
  case Kind::AllReduce:
    return "all-reduce";
  }
  return "?";
}

} // namespace

struct LoopbackHub::Message {
  bool sent = false, copied = false;
  const float *source = nullptr;
  int64_t count = 0;
  cudaEvent_t ready = nullptr; ///< on the sender's stream, after the data
  cudaEvent_t done = nullptr;  ///< on the receiver's stream, after the copy
  ~Message() {
    destroyEvent(ready);
    destroyEvent(done);
  }
};

struct LoopbackHub::Collective {
  Collective(Kind kind, int64_t count, int members)
      : kind(kind), count(count), inputs(members), outputs(members), ready(members), done(members) {
  }
  ~Collective() {
    for (cudaEvent_t e : ready)
      destroyEvent(e);
    for (cudaEvent_t e : done)
      destroyEvent(e);
  }
  Kind kind;
  int64_t count;
  std::vector<const float *> inputs;
  std::vector<float *> outputs;
  std::vector<cudaEvent_t> ready, done;
  int posted = 0, computed = 0, finished = 0;
};

namespace {

/// Pieces of work completed together (a batch of transfers).
class BatchWork final : public Work {
public:
  void add(std::unique_ptr<Work> part) { parts.push_back(std::move(part)); }
  absl::StatusOr<bool> test() override {
    bool all = true;
    for (std::unique_ptr<Work> &part : parts) {
      if (!part)
        continue;
      CONDUIT_ASSIGN_OR_RETURN(bool done, part->test());
      if (done)
        part.reset();
      all = all && done;
    }
    return all;
  }

private:
  std::vector<std::unique_ptr<Work>> parts;
};

} // namespace

class LoopbackTransport final : public Transport {
public:
  LoopbackTransport(LoopbackHub &hub, int64_t rank)
      : hub(hub), rank(rank), where(runtime::RankPosition::of(hub.plan.config, rank)) {}

  absl::StatusOr<std::unique_ptr<Work>> exchange(const std::vector<PeerTransfer> &transfers,
                                                 StreamHandle stream) override {
    return exchangeOn(transfers, static_cast<cudaStream_t>(stream));
  }
  // The CUDA backend's gradients are float, the only type these collectives sum.
  absl::StatusOr<std::unique_ptr<Work>> allGather(int32_t group, Element type, const void *shard,
                                                  void *full, int64_t count,
                                                  StreamHandle stream) override {
    return post(Kind::AllGather, group, type, shard, full, count, stream);
  }
  absl::StatusOr<std::unique_ptr<Work>> reduceScatter(int32_t group, Element type, const void *full,
                                                      void *shard, int64_t count,
                                                      StreamHandle stream) override {
    return post(Kind::ReduceScatter, group, type, full, shard, count, stream);
  }
  absl::StatusOr<std::unique_ptr<Work>> allReduce(int32_t group, Element type, void *data,
                                                  int64_t count, StreamHandle stream) override {
    return post(Kind::AllReduce, group, type, data, data, count, stream);
  }
  absl::StatusOr<double> sumOverRanks(double value) override;
  void abort() override { hub.abort(); }

private:
  class Send;
  class Receive;
  class Member;
  absl::StatusOr<std::unique_ptr<Work>> exchangeOn(const std::vector<PeerTransfer> &transfers,
                                                   cudaStream_t stream);
  absl::StatusOr<std::unique_ptr<Work>> post(Kind kind, int32_t group, Element type,
                                             const void *input, void *output, int64_t count,
                                             StreamHandle stream) {
    if (type != Element::Float32)
      return absl::UnimplementedError(
          absl::StrCat("the loopback transport's ", kindName(kind), " moves float32 only"));
    return post(kind, group, static_cast<const float *>(input), static_cast<float *>(output), count,
                static_cast<cudaStream_t>(stream));
  }
  absl::StatusOr<std::unique_ptr<Work>> post(Kind kind, int32_t group, const float *input,
                                             float *output, int64_t count, cudaStream_t stream);

  LoopbackHub &hub;
  int64_t rank;
  runtime::RankPosition where;
};

/// The sender's side: done once the receiver has enqueued the copy, after which the sender's
/// stream waits for it.
class LoopbackTransport::Send final : public Work {
public:
  Send(LoopbackHub &hub, std::shared_ptr<LoopbackHub::Message> message, cudaStream_t stream)
      : hub(hub), message(std::move(message)), stream(stream) {}
  absl::StatusOr<bool> test() override {
    std::lock_guard<std::mutex> lock(hub.mutex);
    if (hub.aborted)
      return abortedError();
    if (!message->copied)
      return false;
    CONDUIT_CUDA(cudaStreamWaitEvent(stream, message->done, 0));
    return true;
  }

private:
  LoopbackHub &hub;
  std::shared_ptr<LoopbackHub::Message> message;
  cudaStream_t stream;
};

/// The receiver's side: once the send is posted, the copy on the receiver's stream.
class LoopbackTransport::Receive final : public Work {
public:
  Receive(LoopbackHub &hub, std::pair<int64_t, int64_t> channel, int64_t sequence,
          std::shared_ptr<LoopbackHub::Message> message, float *data, int64_t count,
          cudaStream_t stream)
      : hub(hub), channel(channel), sequence(sequence), message(std::move(message)), data(data),
        count(count), stream(stream) {}
  absl::StatusOr<bool> test() override {
    std::lock_guard<std::mutex> lock(hub.mutex);
    if (hub.aborted)
      return abortedError();
    if (!message->sent)
      return false;
    if (message->count != count)
      return absl::InternalError(absl::StrCat("rank ", channel.first, " sends ", message->count,
                                              " floats; rank ", channel.second, " receives ",
                                              count));
    CONDUIT_CUDA(cudaStreamWaitEvent(stream, message->ready, 0));
    if (count > 0)
      CONDUIT_CUDA(cudaMemcpyAsync(data, message->source, count * sizeof(float),
                                   cudaMemcpyDeviceToDevice, stream));
    CONDUIT_ASSIGN_OR_RETURN(message->done, recordEvent(stream));
    message->copied = true;
    hub.channels[channel].messages.erase(sequence);
    return true;
  }

private:
  LoopbackHub &hub;
  std::pair<int64_t, int64_t> channel;
  int64_t sequence;
  std::shared_ptr<LoopbackHub::Message> message;
  float *data;
  int64_t count;
  cudaStream_t stream;
};

/// One member of a collective: computes its result once all have posted, and completes once
/// all have computed theirs (until then its inputs are still being read).
class LoopbackTransport::Member final : public Work {
public:
  Member(LoopbackHub &hub, int32_t group, int64_t sequence,
         std::shared_ptr<LoopbackHub::Collective> call, int position, cudaStream_t stream)
      : hub(hub), group(group), sequence(sequence), call(std::move(call)), position(position),
        stream(stream) {}
  ~Member() override {
    absl::Status ignored; // dropped before completion (a failed run)
    if (temporary)
      CONDUIT_CUDA_NOTE(ignored, cudaFreeAsync(temporary, stream));
  }

  absl::StatusOr<bool> test() override {
    std::lock_guard<std::mutex> lock(hub.mutex);
    if (hub.aborted)
      return abortedError();
    const int members = static_cast<int>(call->inputs.size());
    if (!computed) {
      if (call->posted < members)
        return false;
      CONDUIT_RETURN_IF_ERROR(compute());
      computed = true;
      ++call->computed;
    }
    if (call->computed < members)
      return false;
    for (int m = 0; m < members; ++m)
      if (m != position)
        CONDUIT_CUDA(cudaStreamWaitEvent(stream, call->done[m], 0));
    if (temporary) {
      CONDUIT_CUDA(cudaMemcpyAsync(call->outputs[position], temporary, bytes(),
                                   cudaMemcpyDeviceToDevice, stream));
      CONDUIT_CUDA(cudaFreeAsync(temporary, stream));
      temporary = nullptr;
    }
    if (++call->finished == members)
      hub.groups[group].calls.erase(sequence);
    return true;
  }

private:
  size_t bytes() const { return call->count * sizeof(float); }

  /// This member's result from every member's input, in member order.
  absl::Status compute() {
    const int members = static_cast<int>(call->inputs.size());
    const int64_t n = call->count;
    for (int m = 0; m < members; ++m)
      CONDUIT_CUDA(cudaStreamWaitEvent(stream, call->ready[m], 0));
    float *out = call->outputs[position];
    switch (call->kind) {
    case Kind::AllGather:
      for (int m = 0; m < members; ++m)
        CONDUIT_CUDA(cudaMemcpyAsync(out + m * n, call->inputs[m], bytes(),
                                     cudaMemcpyDeviceToDevice, stream));
      break;
    case Kind::AllReduce:
      CONDUIT_CUDA(cudaMallocAsync(reinterpret_cast<void **>(&temporary), bytes(), stream));
      out = temporary;
      [[fallthrough]];
    case Kind::ReduceScatter: {
      const int64_t offset = call->kind == Kind::ReduceScatter ? position * n : 0;
      CONDUIT_CUDA(cudaMemcpyAsync(out, call->inputs[0] + offset, bytes(), cudaMemcpyDeviceToDevice,
                                   stream));
      for (int m = 1; m < members; ++m)
        CONDUIT_CUDA(add(n, call->inputs[m] + offset, out, stream));
      break;
    }
    }
    CONDUIT_ASSIGN_OR_RETURN(call->done[position], recordEvent(stream));
    return absl::OkStatus();
  }

  LoopbackHub &hub;
  int32_t group;
  int64_t sequence;
  std::shared_ptr<LoopbackHub::Collective> call;
  int position;
  cudaStream_t stream;
  bool computed = false;
  float *temporary = nullptr;
};

absl::StatusOr<std::unique_ptr<Work>>
LoopbackTransport::exchangeOn(const std::vector<PeerTransfer> &transfers, cudaStream_t stream) {
  std::lock_guard<std::mutex> lock(hub.mutex);
  if (hub.aborted)
    return abortedError();
  auto batch = std::make_unique<BatchWork>();
  for (const PeerTransfer &t : transfers) {
    const std::pair<int64_t, int64_t> key =
        t.send ? std::make_pair(rank, t.peer) : std::make_pair(t.peer, rank);
    LoopbackHub::Channel &channel = hub.channels[key];
    const int64_t sequence = t.send ? channel.sends++ : channel.receives++;
    std::shared_ptr<LoopbackHub::Message> &slot = channel.messages[sequence];
    if (!slot)
      slot = std::make_shared<LoopbackHub::Message>();
    if (t.send) {
      CONDUIT_ASSIGN_OR_RETURN(slot->ready, recordEvent(stream));
      slot->source = t.data;
      slot->count = t.count;
      slot->sent = true;
      batch->add(std::make_unique<Send>(hub, slot, stream));
    } else {
      batch->add(std::make_unique<Receive>(hub, key, sequence, slot, t.data, t.count, stream));
    }
  }
  return batch;
}

absl::StatusOr<std::unique_ptr<Work>> LoopbackTransport::post(Kind kind, int32_t group,
                                                              const float *input, float *output,
                                                              int64_t count, cudaStream_t stream) {
  std::lock_guard<std::mutex> lock(hub.mutex);
  if (hub.aborted)
    return abortedError();
  const runtime::Plan &plan = hub.plan;
  if (group < 0 || group >= static_cast<int32_t>(plan.groups.size()) ||
      plan.groups[group].ranks[0] != where.pipelineRank)
    return absl::InternalError(absl::StrCat("rank ", rank, " is not a member of group ", group));
  LoopbackHub::GroupState &state = hub.groups[group];
  const int position = where.replica;
  const int64_t sequence = state.issued[position]++;
  std::shared_ptr<LoopbackHub::Collective> &call = state.calls[sequence];
  if (!call)
    call = std::make_shared<LoopbackHub::Collective>(kind, count, plan.config.data);
  if (call->kind != kind || call->count != count)
    return absl::InternalError(absl::StrCat(
        "collective ", sequence, " of group ", group, ": rank ", rank, " issues a ", kindName(kind),
        " of ", count, " floats, another member a ", kindName(call->kind), " of ", call->count));
  call->inputs[position] = input;
  call->outputs[position] = output;
  CONDUIT_ASSIGN_OR_RETURN(call->ready[position], recordEvent(stream));
  ++call->posted;
  return std::make_unique<Member>(hub, group, sequence, call, position, stream);
}

absl::StatusOr<double> LoopbackTransport::sumOverRanks(double value) {
  std::unique_lock<std::mutex> lock(hub.mutex);
  if (hub.aborted)
    return abortedError();
  const int64_t generation = hub.generation;
  hub.values[rank] = value;
  if (++hub.present == static_cast<int64_t>(hub.values.size())) {
    double sum = 0;
    for (double v : hub.values) // rank order: the same bits whoever arrives last
      sum += v;
    hub.lastSum = sum;
    hub.present = 0;
    ++hub.generation;
    hub.arrived.notify_all();
    return sum;
  }
  const bool passed = hub.arrived.wait_for(lock, std::chrono::duration<double>(hub.timeoutS), [&] {
    return hub.generation != generation || hub.aborted;
  });
  if (hub.aborted)
    return abortedError();
  if (!passed)
    return absl::DeadlineExceededError(
        absl::StrCat("rank ", rank, " waited ", hub.timeoutS,
                     " s for the other ranks of this process to end the step"));
  return hub.lastSum;
}

LoopbackHub::LoopbackHub(const runtime::Plan &plan, double timeoutS)
    : plan(plan), timeoutS(timeoutS), groups(plan.groups.size()),
      values(plan.config.worldSize(), 0.0) {
  for (GroupState &g : groups)
    g.issued.assign(plan.config.data, 0);
}

LoopbackHub::~LoopbackHub() = default;

std::unique_ptr<Transport> LoopbackHub::transport(int64_t rank) {
  return std::make_unique<LoopbackTransport>(*this, rank);
}

void LoopbackHub::abort() {
  std::lock_guard<std::mutex> lock(mutex);
  aborted = true;
  arrived.notify_all();
}

} // namespace conduit::cuda
