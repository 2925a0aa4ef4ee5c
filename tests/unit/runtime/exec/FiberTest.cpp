//===- FiberTest.cpp - a computation that can stop halfway ----------------===//
//
// The contract of Fiber (runtime/exec/Fiber.h): the body and its driver take turns on one
// thread; a body parked when its fiber is destroyed sees park() fail, and runs to its end
// before the destructor returns.
//
//===----------------------------------------------------------------------===//

#include "runtime/exec/Fiber.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

using conduit::runtime::Fiber;

namespace {

TEST(Fiber, BodyAndDriverTakeTurns) {
  absl::StatusOr<std::unique_ptr<Fiber>> made = Fiber::create();
  ASSERT_TRUE(made.ok()) << made.status();
  Fiber &fiber = **made;
  std::vector<std::string> log;
  int shared = 0;
  fiber.run([&] {
    log.push_back("body 1");
    shared = 1;
    EXPECT_TRUE(fiber.park());
    EXPECT_EQ(shared, 2) << "the driver ran in between";
    log.push_back("body 2");
    EXPECT_TRUE(fiber.park());
    log.push_back("body 3");
  });
  EXPECT_TRUE(fiber.unfinished());
  EXPECT_EQ(shared, 1);
  log.push_back("driver 1");
  shared = 2;
  fiber.resume();
  log.push_back("driver 2");
  fiber.resume();
  EXPECT_FALSE(fiber.unfinished());
  EXPECT_EQ(log, (std::vector<std::string>{"body 1", "driver 1", "body 2", "driver 2", "body 3"}));
  // The fiber runs another body after the first has ended.
  fiber.run([&] { log.push_back("again"); });
  EXPECT_FALSE(fiber.unfinished());
  EXPECT_EQ(log.back(), "again");
}

TEST(Fiber, DestroyingItCancelsAParkedBody) {
  std::vector<bool> parks;
  bool ended = false;
  {
    absl::StatusOr<std::unique_ptr<Fiber>> fiber = Fiber::create();
    ASSERT_TRUE(fiber.ok()) << fiber.status();
    (*fiber)->run([&parks, &ended, f = fiber->get()] {
      parks.push_back(f->park());
      parks.push_back(f->park()); // after a cancel, at once
      ended = true;
    });
    EXPECT_TRUE((*fiber)->unfinished());
    EXPECT_TRUE(parks.empty());
  }
  EXPECT_TRUE(ended) << "the body ran to its end before the fiber went";
  EXPECT_EQ(parks, (std::vector<bool>{false, false}));
}

} // namespace
