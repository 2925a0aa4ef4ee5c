//===- LoopbackTransport.cpp - every rank a thread of one process ---------===//

#include "runtime/exec/LoopbackTransport.h"

#include "runtime/exec/Executor.h"

#include "runtime/exec/StageWork.h"

#include "absl/strings/str_cat.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <utility>

namespace conduit::runtime {

namespace {

absl::Status abortedError() { return absl::AbortedError("another rank of this process failed"); }

enum class Kind { AllGather, ReduceScatter, AllReduce, AllReduceMax, AllToAll };

const char *kindName(Kind k) {
  switch (k) {
  case Kind::AllGather:
    return "all-gather";
  case Kind::ReduceScatter:
    return "reduce-scatter";
  case Kind::AllReduce:
    return "all-reduce";
  case Kind::AllReduceMax:
    return "all-reduce (maximum)";
  case Kind::AllToAll:
    return "all-to-all";
  }
  return "?";
}

const char *elementName(Element e) { return e == Element::Float32 ? "float32" : "float64"; }

template <typename T> void maximumElements(int64_t count, const void *from, void *to) {
  const T *x = static_cast<const T *>(from);
  T *y = static_cast<T *>(to);
  for (int64_t i = 0; i < count; ++i)
    y[i] = std::max(y[i], x[i]);
}

template <typename T> void addElements(int64_t count, const void *from, void *to) {
  const T *x = static_cast<const T *>(from);
  T *y = static_cast<T *>(to);
  for (int64_t i = 0; i < count; ++i)
    y[i] += x[i];
}

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

//===----------------------------------------------------------------------===//
// Host memory
//===----------------------------------------------------------------------===//

absl::Status HostLoopbackMemory::copy(Element type, int64_t count, const void *from, void *to,
                                      StreamHandle) {
  if (count > 0)
    std::memcpy(to, from, count * elementBytes(type));
  return absl::OkStatus();
}

absl::Status HostLoopbackMemory::add(Element type, int64_t count, const void *from, void *to,
                                     StreamHandle) {
  if (type == Element::Float32)
    addElements<float>(count, from, to);
  else
    addElements<double>(count, from, to);
  return absl::OkStatus();
}

absl::Status HostLoopbackMemory::maximum(Element type, int64_t count, const void *from, void *to,
                                         StreamHandle) {
  if (type == Element::Float32)
    maximumElements<float>(count, from, to);
  else
    maximumElements<double>(count, from, to);
  return absl::OkStatus();
}

absl::StatusOr<void *> HostLoopbackMemory::allocate(int64_t bytes, StreamHandle) {
  void *scratch = std::malloc(bytes > 0 ? bytes : 1);
  if (!scratch)
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot allocate ", bytes, " bytes for a loopback all-reduce"));
  return scratch;
}

absl::Status HostLoopbackMemory::release(void *scratch, StreamHandle) {
  std::free(scratch);
  return absl::OkStatus();
}

//===----------------------------------------------------------------------===//
// The hub
//===----------------------------------------------------------------------===//

struct LoopbackHub::Message {
  bool sent = false, copied = false;
  const float *source = nullptr;
  int64_t count = 0;
  LoopbackMemory::Fence ready; ///< on the sender's stream, after the data
  LoopbackMemory::Fence done;  ///< on the receiver's stream, after the copy
};

struct LoopbackHub::Collective {
  Collective(Kind kind, Element type, int64_t count, int members)
      : kind(kind), type(type), count(count), inputs(members), outputs(members),
        sendCounts(members), ready(members), done(members) {}
  Kind kind;
  Element type;
  int64_t count;
  std::vector<const char *> inputs;
  std::vector<char *> outputs;
  /// An all-to-all's counts: what each member sends to each member, in elements.
  std::vector<const std::vector<int64_t> *> sendCounts;
  std::vector<LoopbackMemory::Fence> ready, done;
  int posted = 0, computed = 0, finished = 0;
};

class LoopbackTransport final : public Transport {
public:
  LoopbackTransport(LoopbackHub &hub, int64_t rank)
      : hub(hub), rank(rank), where(RankPosition::of(hub.plan.config, rank)) {}

  absl::StatusOr<std::unique_ptr<Work>> exchange(const std::vector<PeerTransfer> &transfers,
                                                 StreamHandle stream) override;
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
  absl::StatusOr<std::unique_ptr<Work>> tensorAllReduce(GroupPass pass, bool, float *data,
                                                        int64_t count, model::Reduction op,
                                                        StreamHandle stream) override {
    return tensorCall(pass, op == model::Reduction::Sum ? Kind::AllReduce : Kind::AllReduceMax,
                      data, data, count, stream);
  }
  absl::StatusOr<std::unique_ptr<Work>> tensorAllGather(GroupPass pass, bool, const float *shard,
                                                        float *full, int64_t count,
                                                        StreamHandle stream) override {
    return tensorCall(pass, Kind::AllGather, shard, full, count, stream);
  }
  absl::StatusOr<std::unique_ptr<Work>> tensorReduceScatter(GroupPass pass, bool, const float *full,
                                                            float *shard, int64_t count,
                                                            StreamHandle stream) override {
    return tensorCall(pass, Kind::ReduceScatter, full, shard, count, stream);
  }
  absl::StatusOr<std::unique_ptr<Work>> expertAllToAll(GroupPass pass, const float *send,
                                                       const std::vector<int64_t> &sendCounts,
                                                       float *recv, const std::vector<int64_t> &,
                                                       StreamHandle stream) override;
  absl::StatusOr<double> sumOverRanks(double value) override;
  void abort() override { hub.abort(); }

private:
  class Send;
  class Receive;
  class Member;
  absl::StatusOr<std::unique_ptr<Work>> post(Kind kind, int32_t group, Element type,
                                             const void *input, void *output, int64_t count,
                                             StreamHandle stream);
  /// Posts a collective of hub group `slot` at `position` of its `members`.
  absl::StatusOr<std::unique_ptr<Work>> postTo(int64_t slot, int position, int members, Kind kind,
                                               Element type, const void *input, void *output,
                                               int64_t count, StreamHandle stream);
  /// Posts a collective of this rank's tensor group for `pass`.
  absl::StatusOr<std::unique_ptr<Work>> tensorCall(GroupPass pass, Kind kind, const void *input,
                                                   void *output, int64_t count,
                                                   StreamHandle stream);

  LoopbackHub &hub;
  int64_t rank;
  RankPosition where;
};

/// The sender's side: done once the receiver has issued the copy, after which the sender's
/// stream waits for it.
class LoopbackTransport::Send final : public Work {
public:
  Send(LoopbackHub &hub, std::shared_ptr<LoopbackHub::Message> message, StreamHandle stream)
      : hub(hub), message(std::move(message)), stream(stream) {}
  absl::StatusOr<bool> test() override {
    std::lock_guard<std::mutex> lock(hub.mutex);
    if (hub.aborted)
      return abortedError();
    if (!message->copied)
      return false;
    CONDUIT_RETURN_IF_ERROR(hub.memory->wait(stream, message->done));
    return true;
  }

private:
  LoopbackHub &hub;
  std::shared_ptr<LoopbackHub::Message> message;
  StreamHandle stream;
};

/// The receiver's side: once the send is posted, the copy on the receiver's stream.
class LoopbackTransport::Receive final : public Work {
public:
  Receive(LoopbackHub &hub, std::pair<int64_t, int64_t> channel, int64_t sequence,
          std::shared_ptr<LoopbackHub::Message> message, float *data, int64_t count,
          StreamHandle stream)
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
    LoopbackMemory &memory = *hub.memory;
    CONDUIT_RETURN_IF_ERROR(memory.wait(stream, message->ready));
    CONDUIT_RETURN_IF_ERROR(memory.copy(Element::Float32, count, message->source, data, stream));
    CONDUIT_ASSIGN_OR_RETURN(message->done, memory.record(stream));
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
  StreamHandle stream;
};

/// One member of a collective: computes its result once all have posted, and completes once
/// all have computed theirs (until then its inputs are still being read).
class LoopbackTransport::Member final : public Work {
public:
  Member(LoopbackHub &hub, int64_t group, int64_t sequence,
         std::shared_ptr<LoopbackHub::Collective> call, int position, StreamHandle stream)
      : hub(hub), group(group), sequence(sequence), call(std::move(call)), position(position),
        stream(stream) {}
  ~Member() override {
    if (temporary) // dropped before completion (a failed run): nobody reads the result
      hub.memory->release(temporary, stream).IgnoreError();
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
    LoopbackMemory &memory = *hub.memory;
    for (int m = 0; m < members; ++m)
      if (m != position)
        CONDUIT_RETURN_IF_ERROR(memory.wait(stream, call->done[m]));
    if (temporary) {
      CONDUIT_RETURN_IF_ERROR(
          memory.copy(call->type, call->count, temporary, call->outputs[position], stream));
      char *scratch = std::exchange(temporary, nullptr);
      CONDUIT_RETURN_IF_ERROR(memory.release(scratch, stream));
    }
    if (++call->finished == members)
      hub.groups[group].calls.erase(sequence);
    return true;
  }

private:
  /// This member's result from every member's input, added in member order.
  absl::Status compute() {
    LoopbackMemory &memory = *hub.memory;
    const int members = static_cast<int>(call->inputs.size());
    const Element type = call->type;
    const int64_t n = call->count, bytes = n * elementBytes(type);
    for (int m = 0; m < members; ++m)
      CONDUIT_RETURN_IF_ERROR(memory.wait(stream, call->ready[m]));
    char *out = call->outputs[position];
    switch (call->kind) {
    case Kind::AllGather:
      for (int m = 0; m < members; ++m)
        CONDUIT_RETURN_IF_ERROR(memory.copy(type, n, call->inputs[m], out + m * bytes, stream));
      break;
    case Kind::AllToAll: {
      // From each member in order, the part it sends to this one.
      const int64_t width = elementBytes(type);
      for (int m = 0; m < members; ++m) {
        const std::vector<int64_t> &counts = *call->sendCounts[m];
        int64_t at = 0;
        for (int j = 0; j < position; ++j)
          at += counts[j];
        const int64_t mine = counts[position];
        if (mine > 0)
          CONDUIT_RETURN_IF_ERROR(
              memory.copy(type, mine, call->inputs[m] + at * width, out, stream));
        out += mine * width;
      }
      break;
    }
    case Kind::AllReduce:
    case Kind::AllReduceMax:
    case Kind::ReduceScatter: {
      // In place (an all-reduce, or a reduce-scatter into this member's block of its input):
      // the sum goes to a temporary, copied out once no member reads the input any more.
      if (call->kind != Kind::ReduceScatter || out == call->inputs[position] + position * bytes) {
        CONDUIT_ASSIGN_OR_RETURN(void *scratch, memory.allocate(bytes, stream));
        temporary = static_cast<char *>(scratch);
        out = temporary;
      }
      const int64_t offset = call->kind == Kind::ReduceScatter ? position * bytes : 0;
      CONDUIT_RETURN_IF_ERROR(memory.copy(type, n, call->inputs[0] + offset, out, stream));
      for (int m = 1; m < members; ++m)
        CONDUIT_RETURN_IF_ERROR(call->kind == Kind::AllReduceMax
                                    ? memory.maximum(type, n, call->inputs[m] + offset, out, stream)
                                    : memory.add(type, n, call->inputs[m] + offset, out, stream));
      break;
    }
    }
    CONDUIT_ASSIGN_OR_RETURN(call->done[position], memory.record(stream));
    return absl::OkStatus();
  }

  LoopbackHub &hub;
  int64_t group;
  int64_t sequence;
  std::shared_ptr<LoopbackHub::Collective> call;
  int position;
  StreamHandle stream;
  bool computed = false;
  char *temporary = nullptr;
};

absl::StatusOr<std::unique_ptr<Work>>
LoopbackTransport::exchange(const std::vector<PeerTransfer> &transfers, StreamHandle stream) {
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
      CONDUIT_ASSIGN_OR_RETURN(slot->ready, hub.memory->record(stream));
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
                                                              Element type, const void *input,
                                                              void *output, int64_t count,
                                                              StreamHandle stream) {
  std::lock_guard<std::mutex> lock(hub.mutex);
  if (hub.aborted)
    return abortedError();
  const Plan &plan = hub.plan;
  const Config &c = plan.config;
  const int32_t groups = static_cast<int32_t>(plan.groups.size());
  // A plan group's expert-data subgroups follow the plan's groups (expertDataGroup).
  const bool expertData = plan.expertsApart() && group >= groups;
  const int32_t planGroup = expertData ? group - groups : group;
  if (planGroup < 0 || planGroup >= groups || plan.groups[planGroup].ranks[0] != where.pipelineRank)
    return absl::InternalError(absl::StrCat("rank ", rank, " is not a member of group ", group));
  if (expertData) {
    const ExpertPlace place = expertDataPlaceOf(c, where);
    return postTo(hub.expertDataSlots + int64_t(planGroup) * c.expert + place.group,
                  static_cast<int>(place.position), int64_t(c.data) * c.tensor / c.expert, kind,
                  type, input, output, count, stream);
  }
  return postTo(int64_t(group) * c.tensor + where.tensorRank, where.replica, c.data, kind, type,
                input, output, count, stream);
}

absl::StatusOr<std::unique_ptr<Work>>
LoopbackTransport::postTo(int64_t slot, int position, int members, Kind kind, Element type,
                          const void *input, void *output, int64_t count, StreamHandle stream) {
  LoopbackHub::GroupState &state = hub.groups[slot];
  const int64_t sequence = state.issued[position]++;
  std::shared_ptr<LoopbackHub::Collective> &call = state.calls[sequence];
  if (!call)
    call = std::make_shared<LoopbackHub::Collective>(kind, type, count, members);
  if (call->kind != kind || call->type != type || call->count != count)
    return absl::InternalError(
        absl::StrCat("collective ", sequence, " of group ", slot, ": rank ", rank, " issues a ",
                     kindName(kind), " of ", count, " ", elementName(type), ", another member a ",
                     kindName(call->kind), " of ", call->count, " ", elementName(call->type)));
  call->inputs[position] = static_cast<const char *>(input);
  call->outputs[position] = static_cast<char *>(output);
  CONDUIT_ASSIGN_OR_RETURN(call->ready[position], hub.memory->record(stream));
  ++call->posted;
  return std::make_unique<Member>(hub, slot, sequence, call, position, stream);
}

absl::StatusOr<std::unique_ptr<Work>> LoopbackTransport::tensorCall(GroupPass pass, Kind kind,
                                                                    const void *input, void *output,
                                                                    int64_t count,
                                                                    StreamHandle stream) {
  std::lock_guard<std::mutex> lock(hub.mutex);
  if (hub.aborted)
    return abortedError();
  const Config &c = hub.plan.config;
  const int64_t group = int64_t(where.pipelineRank) * c.data + where.replica;
  const int64_t slot =
      int64_t(hub.plan.groups.size()) * c.tensor + group * kGroupPasses + static_cast<int>(pass);
  return postTo(slot, where.tensorRank, c.tensor, kind, Element::Float32, input, output, count,
                stream);
}

absl::StatusOr<std::unique_ptr<Work>>
LoopbackTransport::expertAllToAll(GroupPass pass, const float *send,
                                  const std::vector<int64_t> &sendCounts, float *recv,
                                  const std::vector<int64_t> &, StreamHandle stream) {
  std::lock_guard<std::mutex> lock(hub.mutex);
  if (hub.aborted)
    return abortedError();
  const Config &c = hub.plan.config;
  // The expert groups' slots follow the tensor groups', one per group and pass.
  const ExpertPlace place = expertPlaceOf(c, where);
  const int64_t slot = hub.expertSlots + place.group * kGroupPasses + static_cast<int>(pass);
  const int position = static_cast<int>(place.position);
  CONDUIT_ASSIGN_OR_RETURN(
      std::unique_ptr<Work> work,
      postTo(slot, position, c.expert, Kind::AllToAll, Element::Float32, send, recv, 0, stream));
  hub.groups[slot].calls[hub.groups[slot].issued[position] - 1]->sendCounts[position] = &sendCounts;
  return work;
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

LoopbackHub::LoopbackHub(const Plan &plan, double timeoutS, std::unique_ptr<LoopbackMemory> memory)
    : plan(plan), timeoutS(timeoutS), memory(std::move(memory)), groups(plan.groups.size()),
      values(plan.config.worldSize(), 0.0) {
  const Config &c = plan.config;
  groups.resize(plan.groups.size() * c.tensor);
  for (GroupState &g : groups)
    g.issued.assign(c.data, 0);
  if (c.tensor > 1)
    for (int64_t k = 0; k < int64_t(c.pipeline) * c.data * kGroupPasses; ++k)
      groups.emplace_back().issued.assign(c.tensor, 0);
  expertSlots = static_cast<int64_t>(groups.size());
  if (c.expert > 1)
    for (int64_t k = 0; k < int64_t(c.pipeline) * c.data * c.tensor / c.expert * kGroupPasses; ++k)
      groups.emplace_back().issued.assign(c.expert, 0);
  expertDataSlots = static_cast<int64_t>(groups.size());
  if (plan.expertsApart())
    for (int64_t k = 0; k < int64_t(plan.groups.size()) * c.expert; ++k)
      groups.emplace_back().issued.assign(int64_t(c.data) * c.tensor / c.expert, 0);
}

LoopbackHub::~LoopbackHub() = default;

std::unique_ptr<Transport> LoopbackHub::transport(int64_t rank) {
  return std::make_unique<LoopbackTransport>(*this, rank);
}

void LoopbackHub::abort() {
  {
    std::lock_guard<std::mutex> lock(mutex);
    aborted = true;
  }
  arrived.notify_all();
}

} // namespace conduit::runtime
