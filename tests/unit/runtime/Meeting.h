//===- Meeting.h - threads of one test meeting as a group's members --*- C++ -*-===//
//
// For the tests that simulate a group of ranks as threads of one process (a tensor group, an
// expert group): where the members meet in a collective, and an expert group meeting there.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_TESTS_UNIT_RUNTIME_MEETING_H
#define CONDUIT_TESTS_UNIT_RUNTIME_MEETING_H

#include "runtime/model/TensorGroup.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <utility>
#include <vector>

namespace conduit::model {

/// Where the members of a simulated group meet: each posts its input, every member computes
/// its own result from all inputs, and no one leaves before all are done reading.
template <typename Input> class Meeting {
public:
  using Inputs = std::vector<Input>;
  explicit Meeting(int size) : size(size), inputs(size) {}

  void meet(int rank, Input input, const std::function<void(const Inputs &)> &compute) {
    inputs[rank] = input;
    barrier();
    compute(inputs);
    barrier();
  }

private:
  void barrier() {
    std::unique_lock<std::mutex> lock(mutex);
    const int64_t generation = generations;
    if (++arrived == size) {
      arrived = 0;
      ++generations;
      changed.notify_all();
      return;
    }
    changed.wait(lock, [&] { return generations != generation; });
  }

  const int size;
  Inputs inputs;
  std::mutex mutex;
  std::condition_variable changed;
  int arrived = 0;
  int64_t generations = 0;
};

/// An expert group of members simulated as threads of one process: an all-to-all meets every
/// member's send buffer and counts, and each member copies its parts of them (checking that
/// the counts it expects are the ones sent).
template <typename T> class ThreadedExpertGroup final : public ExpertGroup<T> {
public:
  /// A member's send buffer and its counts to each member.
  using Sent = std::pair<const T *, const std::vector<int64_t> *>;
  ThreadedExpertGroup(Meeting<Sent> &meeting, int64_t size, int64_t position)
      : meeting(meeting), members(size), at(position) {}
  int64_t size() const override { return members; }
  int64_t position() const override { return at; }
  void allToAll(ExpertExchange, const T *send, const std::vector<int64_t> &sendCounts, T *recv,
                const std::vector<int64_t> &recvCounts) override {
    meeting.meet(static_cast<int>(at), {send, &sendCounts}, [&](const std::vector<Sent> &all) {
      T *to = recv;
      for (int64_t m = 0; m < members; ++m) {
        const std::vector<int64_t> &theirs = *all[m].second;
        int64_t from = 0;
        for (int64_t j = 0; j < at; ++j)
          from += theirs[j];
        EXPECT_EQ(theirs[at], recvCounts[m]) << "member " << at << " from " << m;
        to = std::copy(all[m].first + from, all[m].first + from + recvCounts[m], to);
      }
    });
  }

private:
  Meeting<Sent> &meeting;
  const int64_t members, at;
};

} // namespace conduit::model

#endif // CONDUIT_TESTS_UNIT_RUNTIME_MEETING_H
