//===- LoopbackTransportTest.cpp - rank threads meeting in a hub ----------===//
//
// The loopback hub in host memory, with one thread per rank of a 2 x 2 plan (pipeline ranks 0
// and 1, two replicas each): transfers match in order per pair whatever the order ranks post
// them, collectives sum float and double in member order (a reduce-scatter also in place, and
// over an expert-data subgroup), a tensor group's collectives meet per pass, the loss sum
// covers every rank, and an abort fails what is pending at once.
//
//===----------------------------------------------------------------------===//

#include "runtime/exec/LoopbackTransport.h"

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <thread>

using namespace conduit::runtime;

namespace {

/// Pipeline 2 x data 2, data-inner: ranks 0 and 1 are pipeline rank 0 (group 0), ranks 2 and
/// 3 pipeline rank 1 (group 1).
Plan twoByTwo() {
  Plan plan;
  plan.config.pipeline = 2;
  plan.config.data = 2;
  Group first, second;
  first.ranks = {0};
  second.ranks = {1};
  plan.groups = {first, second};
  return plan;
}

/// Polls `work` until it completes or fails.
absl::Status complete(absl::StatusOr<std::unique_ptr<Work>> work) {
  if (!work.ok())
    return work.status();
  const auto start = std::chrono::steady_clock::now();
  while (true) {
    absl::StatusOr<bool> done = (*work)->test();
    if (!done.ok() || *done)
      return done.status();
    if (std::chrono::steady_clock::now() - start > std::chrono::seconds(10))
      return absl::DeadlineExceededError("the work did not complete");
    std::this_thread::yield();
  }
}

/// Runs `body(rank)` on a thread per rank of the plan.
void onEveryRank(const Plan &plan, const std::function<void(int64_t)> &body) {
  std::vector<std::thread> threads;
  for (int64_t r = 0; r < plan.config.worldSize(); ++r)
    threads.emplace_back(body, r);
  for (std::thread &t : threads)
    t.join();
}

TEST(LoopbackTransport, TransfersMatchInOrderPerPair) {
  const Plan plan = twoByTwo();
  LoopbackHub hub(plan, 10, std::make_unique<HostLoopbackMemory>());
  // Rank 0 sends two messages to rank 2; rank 2 posts both receives in one batch.
  std::vector<float> first = {1, 2, 3}, second = {4, 5}, got1(3), got2(2);
  onEveryRank(plan, [&](int64_t rank) {
    std::unique_ptr<Transport> t = hub.transport(rank);
    if (rank == 0) {
      EXPECT_TRUE(complete(t->exchange({{true, 2, first.data(), 3}}, nullptr)).ok());
      EXPECT_TRUE(complete(t->exchange({{true, 2, second.data(), 2}}, nullptr)).ok());
    } else if (rank == 2) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20)); // after the sends
      EXPECT_TRUE(
          complete(t->exchange({{false, 0, got1.data(), 3}, {false, 0, got2.data(), 2}}, nullptr))
              .ok());
    }
  });
  EXPECT_EQ(got1, first);
  EXPECT_EQ(got2, second);
}

TEST(LoopbackTransport, CollectivesSumInMemberOrder) {
  const Plan plan = twoByTwo();
  LoopbackHub hub(plan, 10, std::make_unique<HostLoopbackMemory>());
  std::vector<std::vector<double>> reduced(4);
  std::vector<std::vector<float>> shards(4), gathered(4);
  std::vector<double> sums(4);
  onEveryRank(plan, [&](int64_t rank) {
    std::unique_ptr<Transport> t = hub.transport(rank);
    const int32_t group = static_cast<int32_t>(rank / 2);
    const int replica = static_cast<int>(rank % 2);
    // All-reduce in double, in place: 0.1 + 0.2 on replica order.
    reduced[rank] = {replica ? 0.2 : 0.1, replica ? 2.0 : 1.0};
    EXPECT_TRUE(
        complete(t->allReduce(group, Element::Float64, reduced[rank].data(), 2, nullptr)).ok());
    // Reduce-scatter in float: replica r keeps the sum of everybody's r-th half.
    std::vector<float> full = {float(rank), 10.f * rank, 100.f * rank, 1000.f * rank};
    shards[rank].resize(2);
    EXPECT_TRUE(complete(t->reduceScatter(group, Element::Float32, full.data(), shards[rank].data(),
                                          2, nullptr))
                    .ok());
    // All-gather the shards back.
    gathered[rank].resize(4);
    EXPECT_TRUE(complete(t->allGather(group, Element::Float32, shards[rank].data(),
                                      gathered[rank].data(), 2, nullptr))
                    .ok());
    absl::StatusOr<double> sum = t->sumOverRanks(static_cast<double>(rank) + 0.5);
    ASSERT_TRUE(sum.ok()) << sum.status();
    sums[rank] = *sum;
  });
  for (int64_t rank = 0; rank < 4; ++rank) {
    EXPECT_EQ(reduced[rank], (std::vector<double>{0.1 + 0.2, 3.0})) << rank;
    const float a = rank < 2 ? 0 : 2, b = rank < 2 ? 1 : 3; // the group's two ranks
    const std::vector<float> whole = {a + b, 10 * a + 10 * b, 100 * a + 100 * b,
                                      1000 * a + 1000 * b};
    EXPECT_EQ(shards[rank], std::vector<float>(whole.begin() + 2 * (rank % 2),
                                               whole.begin() + 2 * (rank % 2) + 2))
        << rank;
    EXPECT_EQ(gathered[rank], whole) << rank;
    EXPECT_EQ(sums[rank], 0.5 + 1.5 + 2.5 + 3.5);
  }
}

TEST(LoopbackTransport, AReduceScatterInPlaceLeavesEachSumInItsMembersBlock) {
  // ZeRO-1's reduce-scatter: replica r's shard is its own block r of the buffer it reduces.
  const Plan plan = twoByTwo();
  LoopbackHub hub(plan, 10, std::make_unique<HostLoopbackMemory>());
  std::vector<std::vector<double>> full(4);
  onEveryRank(plan, [&](int64_t rank) {
    std::unique_ptr<Transport> t = hub.transport(rank);
    const int replica = static_cast<int>(rank % 2);
    full[rank] = {1.0 + rank, 10.0 + rank, 100.0 + rank, 1000.0 + rank};
    EXPECT_TRUE(
        complete(t->reduceScatter(static_cast<int32_t>(rank / 2), Element::Float64,
                                  full[rank].data(), full[rank].data() + 2 * replica, 2, nullptr))
            .ok());
  });
  for (int64_t rank = 0; rank < 4; ++rank) {
    const double a = rank < 2 ? 0 : 2, b = a + 1; // the group's two ranks
    const int replica = static_cast<int>(rank % 2);
    const std::vector<double> sums = {2 + a + b, 20 + a + b, 200 + a + b, 2000 + a + b};
    EXPECT_EQ(full[rank][2 * replica], sums[2 * replica]) << rank;
    EXPECT_EQ(full[rank][2 * replica + 1], sums[2 * replica + 1]) << rank;
  }
}

TEST(LoopbackTransport, ExpertDataSubgroupsHoldTheRanksWithTheSameExperts) {
  // One pipeline rank of 4 replicas, E = 2: replicas 0 and 2 hold the same experts, 1 and 3.
  Plan plan;
  plan.config.pipeline = 1;
  plan.config.data = 4;
  plan.config.expert = 2;
  plan.transformer.emplace().numExperts = 2; // the routed experts apart (Plan::expertsApart)
  plan.groups.emplace_back().ranks = {0};
  LoopbackHub hub(plan, 10, std::make_unique<HostLoopbackMemory>());
  std::vector<std::vector<float>> data(4), gathered(4);
  onEveryRank(plan, [&](int64_t rank) {
    std::unique_ptr<Transport> t = hub.transport(rank);
    const int32_t group = expertDataGroup(plan, 0);
    data[rank] = {float(1 << rank)};
    EXPECT_TRUE(
        complete(t->allReduce(group, Element::Float32, data[rank].data(), 1, nullptr)).ok());
    // Positioned by replica / E: the lower replica's value first.
    const std::vector<float> mine = {float(rank)};
    gathered[rank].resize(2);
    EXPECT_TRUE(complete(t->allGather(group, Element::Float32, mine.data(), gathered[rank].data(),
                                      1, nullptr))
                    .ok());
  });
  for (int64_t rank = 0; rank < 4; ++rank) {
    EXPECT_EQ(data[rank][0], rank % 2 == 0 ? 1 + 4 : 2 + 8) << rank;
    EXPECT_EQ(gathered[rank], (std::vector<float>{float(rank % 2), float(rank % 2 + 2)})) << rank;
  }
  // Another pipeline rank's group is not this rank's.
  EXPECT_FALSE(complete(hub.transport(0)->allReduce(expertDataGroup(plan, 0) + 1, Element::Float32,
                                                    data[0].data(), 1, nullptr))
                   .ok());
}

// Expert groups of 2 among a pipeline rank's 4 replicas (positions by replica): each member
// sends a different count to each member, and receives the others' parts in member order.
TEST(LoopbackTransport, TensorCollectivesMatchPerPass) {
  // One tensor group of two. Each member posts a forward's and a backward's all-reduce without
  // waiting, in opposite orders (the halves of a paired step interleaving theirs as their
  // arrivals allow): each pass's meet, and nothing of one pass is summed with the other's.
  Plan plan;
  plan.config.tensor = 2;
  plan.groups.emplace_back().ranks = {0};
  LoopbackHub hub(plan, 10, std::make_unique<HostLoopbackMemory>());
  std::vector<float> forward(2), backward(2);
  onEveryRank(plan, [&](int64_t rank) {
    std::unique_ptr<Transport> t = hub.transport(rank);
    forward[rank] = float(rank + 1);
    backward[rank] = float(10 * (rank + 1));
    auto post = [&](GroupPass pass) {
      float *data = pass == GroupPass::Forward ? &forward[rank] : &backward[rank];
      return t->tensorAllReduce(pass, /*post=*/true, data, 1, conduit::model::Reduction::Sum,
                                nullptr);
    };
    const GroupPass first = rank == 0 ? GroupPass::Forward : GroupPass::Backward;
    const GroupPass second = rank == 0 ? GroupPass::Backward : GroupPass::Forward;
    absl::StatusOr<std::unique_ptr<Work>> a = post(first), b = post(second);
    ASSERT_TRUE(a.ok() && b.ok());
    // Polled in turn, as the executor polls its parked halves: a member computes its result
    // of a call when it tests it.
    bool aDone = false, bDone = false;
    const auto start = std::chrono::steady_clock::now();
    while (!(aDone && bDone) &&
           std::chrono::steady_clock::now() - start < std::chrono::seconds(10)) {
      for (auto [work, done] : {std::pair(&*a, &aDone), std::pair(&*b, &bDone)})
        if (!*done) {
          absl::StatusOr<bool> tested = (*work)->test();
          ASSERT_TRUE(tested.ok()) << tested.status();
          *done = *tested;
        }
      std::this_thread::yield();
    }
    EXPECT_TRUE(aDone && bDone);
  });
  EXPECT_EQ(forward, (std::vector<float>{3, 3}));
  EXPECT_EQ(backward, (std::vector<float>{30, 30}));
}

TEST(LoopbackTransport, ExpertAllToAllMovesEachMembersPart) {
  Plan plan;
  plan.config.pipeline = 1;
  plan.config.data = 4;
  plan.config.expert = 2;
  plan.groups = {Group{{0}}};
  LoopbackHub hub(plan, 10, std::make_unique<HostLoopbackMemory>());
  std::vector<std::vector<float>> got(4);
  onEveryRank(plan, [&](int64_t rank) {
    std::unique_ptr<Transport> t = hub.transport(rank);
    // Rank r sends r + 1 values to position 0 and 1 value to position 1, each 10 r + j.
    const int64_t toFirst = rank + 1;
    std::vector<float> send;
    for (int64_t j = 0; j < toFirst + 1; ++j)
      send.push_back(static_cast<float>(10 * rank + j));
    const int64_t position = rank % 2, partner = rank ^ 1;
    const std::vector<int64_t> sendCounts = {toFirst, 1};
    const std::vector<int64_t> recvCounts =
        position == 0 ? std::vector<int64_t>{rank + 1, partner + 1} : std::vector<int64_t>{1, 1};
    int64_t total = 0;
    for (int64_t c : recvCounts)
      total += c;
    got[rank].resize(total);
    // The same exchange, negated, in the backward pass, which the odd ranks post first: each
    // pass's all-to-alls are matched apart, whatever order a rank interleaves them in.
    std::vector<float> negated(send.size()), back(total);
    for (size_t j = 0; j < send.size(); ++j)
      negated[j] = -send[j];
    auto post = [&](GroupPass pass) {
      return pass == GroupPass::Forward ? t->expertAllToAll(pass, send.data(), sendCounts,
                                                            got[rank].data(), recvCounts, nullptr)
                                        : t->expertAllToAll(pass, negated.data(), sendCounts,
                                                            back.data(), recvCounts, nullptr);
    };
    const bool backwardFirst = rank % 2 == 1;
    absl::StatusOr<std::unique_ptr<Work>> first =
        post(backwardFirst ? GroupPass::Backward : GroupPass::Forward);
    absl::StatusOr<std::unique_ptr<Work>> second =
        post(backwardFirst ? GroupPass::Forward : GroupPass::Backward);
    ASSERT_TRUE(first.ok() && second.ok());
    // Polled together, as a rank polls the two halves of a paired step.
    const auto start = std::chrono::steady_clock::now();
    bool done[2] = {false, false};
    while (!done[0] || !done[1]) {
      for (int k = 0; k < 2; ++k)
        if (!done[k]) {
          absl::StatusOr<bool> d = (k == 0 ? *first : *second)->test();
          ASSERT_TRUE(d.ok()) << d.status();
          done[k] = *d;
        }
      ASSERT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
    }
    for (size_t j = 0; j < back.size(); ++j)
      EXPECT_EQ(back[j], -got[rank][j]) << "rank " << rank << ", element " << j;
  });
  // Group {0, 1}: position 0 takes rank 0's first value and rank 1's first two; position 1 the
  // last value of each.
  EXPECT_EQ(got[0], (std::vector<float>{0, 10, 11}));
  EXPECT_EQ(got[1], (std::vector<float>{1, 12}));
  EXPECT_EQ(got[2], (std::vector<float>{20, 21, 22, 30, 31, 32, 33}));
  EXPECT_EQ(got[3], (std::vector<float>{23, 34}));
}

TEST(LoopbackTransport, MismatchedCollectivesAreErrors) {
  const Plan plan = twoByTwo();
  LoopbackHub hub(plan, 10, std::make_unique<HostLoopbackMemory>());
  std::unique_ptr<Transport> zero = hub.transport(0), one = hub.transport(1);
  std::vector<double> x(4);
  std::vector<float> y(4);
  ASSERT_TRUE(zero->allReduce(0, Element::Float64, x.data(), 4, nullptr).ok());
  absl::StatusOr<std::unique_ptr<Work>> other =
      one->allReduce(0, Element::Float32, y.data(), 4, nullptr);
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.status().message().find("float64"), std::string::npos) << other.status();
  EXPECT_FALSE(zero->allReduce(1, Element::Float64, x.data(), 4, nullptr).ok())
      << "rank 0 is not a member of group 1";
}

TEST(LoopbackTransport, AbortFailsPendingWork) {
  const Plan plan = twoByTwo();
  LoopbackHub hub(plan, 10, std::make_unique<HostLoopbackMemory>());
  std::unique_ptr<Transport> t = hub.transport(2);
  std::vector<float> data(3);
  absl::StatusOr<std::unique_ptr<Work>> receive =
      t->exchange({{false, 0, data.data(), 3}}, nullptr);
  ASSERT_TRUE(receive.ok());
  EXPECT_FALSE(*(*receive)->test()) << "nobody sent yet";
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    hub.transport(0)->abort();
  });
  absl::Status status = complete(std::move(receive));
  aborter.join();
  EXPECT_TRUE(absl::IsAborted(status)) << status;
  EXPECT_TRUE(absl::IsAborted(t->sumOverRanks(1).status()));
}

} // namespace
