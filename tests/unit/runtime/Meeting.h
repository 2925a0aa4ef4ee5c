//===- Meeting.h - threads of one test meeting as a group's members --*- C++ -*-===//
//
// For the tests that simulate a group of ranks as threads of one process (a tensor group, an
// expert group): where the members meet in a collective.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_TESTS_UNIT_RUNTIME_MEETING_H
#define CONDUIT_TESTS_UNIT_RUNTIME_MEETING_H

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
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

} // namespace conduit::model

#endif // CONDUIT_TESTS_UNIT_RUNTIME_MEETING_H
