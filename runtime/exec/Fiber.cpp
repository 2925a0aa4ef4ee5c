//===- Fiber.cpp - a computation that can stop halfway -------------------===//

#include "runtime/exec/Fiber.h"

#include "absl/strings/str_cat.h"

#include <cstdint>
#include <cstdlib>

#include <sys/mman.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define CONDUIT_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CONDUIT_ASAN 1
#endif
#endif

#ifdef CONDUIT_ASAN
#include <sanitizer/common_interface_defs.h>
#endif

namespace conduit::runtime {

namespace {
constexpr std::size_t kStackBytes = std::size_t(8) << 20;

/// Announces a switch to the stack [bottom, bottom + size); `fake` keeps the leaving side's
/// fake stack (null: the leaving side ends).
void startSwitch(void **fake, const void *bottom, std::size_t size) {
#ifdef CONDUIT_ASAN
  __sanitizer_start_switch_fiber(fake, bottom, size);
#else
  (void)fake, (void)bottom, (void)size;
#endif
}
/// Completes a switch on the arriving side; `from` receives the stack that was left.
void finishSwitch(void *fake, const void **fromBottom, std::size_t *fromSize) {
#ifdef CONDUIT_ASAN
  __sanitizer_finish_switch_fiber(fake, fromBottom, fromSize);
#else
  (void)fake, (void)fromBottom, (void)fromSize;
#endif
}
} // namespace

absl::StatusOr<std::unique_ptr<Fiber>> Fiber::create() {
  const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  void *m = mmap(nullptr, page + kStackBytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
  if (m == MAP_FAILED)
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot reserve ", kStackBytes >> 20, " MiB for a paired step's stack"));
  std::unique_ptr<Fiber> fiber(new Fiber());
  fiber->memory = static_cast<char *>(m);
  fiber->stackBytes = kStackBytes;
  mprotect(fiber->memory, page, PROT_NONE); // an overflow faults instead of writing below
  return fiber;
}

Fiber::~Fiber() {
  if (active) {
    cancelled = true;
    enter(); // back when the body returns
  }
  munmap(memory, static_cast<std::size_t>(sysconf(_SC_PAGESIZE)) + stackBytes);
}

void Fiber::entry(unsigned int high, unsigned int low) {
  Fiber *f = reinterpret_cast<Fiber *>((static_cast<std::uintptr_t>(high) << 32) | low);
  finishSwitch(nullptr, &f->driverBottom, &f->driverSize);
  f->body();
  f->body = nullptr;
  f->active = false;
  startSwitch(nullptr, f->driverBottom, f->driverSize); // this stack ends here
  setcontext(&f->driver);
  std::abort(); // setcontext does not return
}

void Fiber::enter() {
  startSwitch(&driverFake, memory + static_cast<std::size_t>(sysconf(_SC_PAGESIZE)), stackBytes);
  swapcontext(&driver, &self);
  finishSwitch(driverFake, nullptr, nullptr);
}

void Fiber::run(std::function<void()> f) {
  body = std::move(f);
  active = true;
  getcontext(&self);
  self.uc_stack.ss_sp = memory + static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  self.uc_stack.ss_size = stackBytes;
  self.uc_link = nullptr;
  const auto address = reinterpret_cast<std::uintptr_t>(this);
  makecontext(&self, reinterpret_cast<void (*)()>(&Fiber::entry), 2,
              static_cast<unsigned int>(address >> 32), static_cast<unsigned int>(address));
  enter();
}

void Fiber::resume() {
  if (active)
    enter();
}

bool Fiber::park() {
  if (cancelled)
    return false;
  startSwitch(&selfFake, driverBottom, driverSize);
  swapcontext(&self, &driver);
  finishSwitch(selfFake, &driverBottom, &driverSize);
  return !cancelled;
}

} // namespace conduit::runtime
