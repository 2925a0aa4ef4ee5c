//===- Fiber.h - a computation that can stop halfway -------------*- C++ -*-===//
//
// A Fiber runs a function on a stack of its own, on the calling thread, switching back and
// forth with the code that drives it: run() and resume() return once the function parks or
// returns; park(), called by the function, returns once the driver resumes it. It is a
// coroutine whose function need not be written to stop (ucontext's swapcontext; the switch
// costs a few hundred nanoseconds, no system scheduling). BackendCore runs the two computes of a
// paired step on fibers, each parking at the expert all-to-alls it posts, so that one computes
// while the other's all-to-all is in flight; everything stays on the rank's thread, so whatever
// they share (the Ops, the memory counter, the transport) needs no lock and MPI no thread level.
//
// The stack is reserved (8 MiB, committed as it is touched) with a guard page below it. Under
// AddressSanitizer every switch is announced (__sanitizer_start_switch_fiber), so it follows
// the stacks. Destroying a Fiber whose function is parked cancels it: park() returns false at
// once (then and at every later call), and the function must return (it is run to its end).
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_RUNTIME_EXEC_FIBER_H
#define CONDUIT_RUNTIME_EXEC_FIBER_H

#include "runtime/Status.h"

#include <cstddef>
#include <functional>
#include <memory>

#include <ucontext.h>

namespace conduit::runtime {

class Fiber {
public:
  /// Reserves the stack; fails only when the address space is exhausted.
  static absl::StatusOr<std::unique_ptr<Fiber>> create();
  ~Fiber();
  Fiber(const Fiber &) = delete;
  Fiber &operator=(const Fiber &) = delete;

  /// Starts `body` and returns once it parks or returns. Only while no body is unfinished.
  void run(std::function<void()> body);
  /// Continues the parked body until it parks again or returns.
  void resume();
  /// From the body: hands control to the driver until it resumes the body (true), or the
  /// fiber is being destroyed (false).
  bool park();
  /// Whether the body of the last run() is unfinished (parked).
  bool unfinished() const { return active; }

private:
  Fiber() = default;
  static void entry(unsigned int high, unsigned int low);
  /// Switches from the driver to the body, and returns when the body hands control back.
  void enter();

  ucontext_t driver{}, self{};
  char *memory = nullptr; ///< the guard page, then the stack
  std::size_t stackBytes = 0;
  std::function<void()> body;
  bool active = false, cancelled = false;
  /// AddressSanitizer's fake stacks and the driver's stack (unused without it).
  void *driverFake = nullptr, *selfFake = nullptr;
  const void *driverBottom = nullptr;
  std::size_t driverSize = 0;
};

} // namespace conduit::runtime

#endif // CONDUIT_RUNTIME_EXEC_FIBER_H
