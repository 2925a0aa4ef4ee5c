//===- MemoryCounterTest.cpp - the bytes an Ops holds, by use -------------===//
//
// The counter behind conduit-run's measured peak memory: allocations and releases per use,
// the peak and what made it up, counted widths, scopes, moved buffers, and what a forward and
// backward of a real stage leave counted once they are done.
//
//===----------------------------------------------------------------------===//

#include "runtime/model/MemoryCounter.h"
#include "runtime/model/Gpt.h"
#include "runtime/model/Ops.h"

#include "GptPlan.h"

#include <gtest/gtest.h>

using namespace conduit;
using namespace conduit::model;

namespace {

int64_t live(const CpuOps<float> &ops, MemoryUse use) { return ops.memory().liveBytes(use); }

TEST(MemoryCounterTest, CountsAllocationsAndReleasesPerUse) {
  CpuOps<float> ops;
  Buffer<float> params, slot;
  {
    MemoryScope scope(ops.memory(), MemoryUse::Parameters);
    params = ops.allocate(100);
  }
  {
    MemoryScope scope(ops.memory(), MemoryUse::ReceiveBuffers);
    slot = ops.allocate(10);
  }
  EXPECT_EQ(live(ops, MemoryUse::Parameters), 400);
  EXPECT_EQ(live(ops, MemoryUse::ReceiveBuffers), 40);
  EXPECT_EQ(ops.memory().liveBytes(), 440);
  EXPECT_EQ(ops.memory().heldBytes(), 440);
  slot.reset();
  EXPECT_EQ(live(ops, MemoryUse::ReceiveBuffers), 0);
  EXPECT_EQ(ops.memory().liveBytes(), 400);
  params = Buffer<float>();
  EXPECT_EQ(ops.memory().liveBytes(), 0);
  EXPECT_EQ(ops.memory().heldBytes(), 0);
}

TEST(MemoryCounterTest, KeepsThePeakAndWhatMadeItUp) {
  CpuOps<float> ops;
  MemoryScope parameters(ops.memory(), MemoryUse::Parameters);
  Buffer<float> p = ops.allocate(50); // 200 bytes
  Buffer<float> a, b;
  {
    MemoryScope saved(ops.memory(), MemoryUse::Activations);
    a = ops.allocate(25); // 300 in all
    b = ops.allocate(25); // 400: the peak
  }
  a.reset();
  b.reset();
  Buffer<float> more = ops.allocate(10); // 240, below the peak
  const MemoryPeak &peak = ops.memory().peak();
  EXPECT_EQ(peak.countedBytes, 400);
  EXPECT_EQ(peak.heldBytes, 400);
  EXPECT_EQ(peak.atPeak[static_cast<int>(MemoryUse::Parameters)], 200);
  EXPECT_EQ(peak.atPeak[static_cast<int>(MemoryUse::Activations)], 200);
  EXPECT_EQ(peak.atPeak[static_cast<int>(MemoryUse::Gradients)], 0);

  // A new measurement starts from what is live.
  ops.memory().resetPeak();
  EXPECT_EQ(ops.memory().peak().countedBytes, 240);
  EXPECT_EQ(ops.memory().peak().atPeak[static_cast<int>(MemoryUse::Activations)], 0);
}

TEST(MemoryCounterTest, ScopesNestAndRestore) {
  CpuOps<float> ops;
  EXPECT_EQ(ops.memory().use(), MemoryUse::Working);
  {
    MemoryScope outer(ops.memory(), MemoryUse::Activations);
    {
      MemoryScope inner(ops.memory(), MemoryUse::Gradients, 0);
      EXPECT_EQ(ops.memory().use(), MemoryUse::Gradients);
    }
    EXPECT_EQ(ops.memory().use(), MemoryUse::Activations);
    Buffer<float> x = ops.allocate(4);
    EXPECT_EQ(live(ops, MemoryUse::Activations), 16); // the inner width is gone too
  }
  EXPECT_EQ(ops.memory().use(), MemoryUse::Working);
}

TEST(MemoryCounterTest, CountsAtAStatedWidthAndHoldsWhatIsAllocated) {
  CpuOps<float> ops;
  Buffer<double> accumulators;
  Buffer<float> piece;
  {
    // Double accumulators at the plan's 4 bytes per gradient.
    MemoryScope scope(ops.memory(), MemoryUse::Gradients, kPlanGradientBytes);
    accumulators = ops.allocateDouble(100);
  }
  EXPECT_EQ(live(ops, MemoryUse::Gradients), 400);
  EXPECT_EQ(ops.memory().heldBytes(), 800);
  {
    MemoryScope scope(ops.memory(), MemoryUse::Gradients, 0);
    piece = ops.allocate(100);
  }
  EXPECT_EQ(live(ops, MemoryUse::Gradients), 400);
  EXPECT_EQ(ops.memory().heldBytes(), 1200);
  EXPECT_EQ(ops.memory().peak().countedBytes, 400);
  EXPECT_EQ(ops.memory().peak().heldBytes, 1200);
  piece.reset();
  accumulators.reset();
  EXPECT_EQ(ops.memory().liveBytes(), 0);
  EXPECT_EQ(ops.memory().heldBytes(), 0);
}

TEST(MemoryCounterTest, AMovedBufferIsCountedOnce) {
  CpuOps<float> ops;
  Buffer<float> a = ops.allocate(8);
  Buffer<float> b = std::move(a);
  EXPECT_EQ(ops.memory().liveBytes(), 32);
  std::vector<Buffer<float>> kept;
  kept.push_back(std::move(b));
  kept.resize(10); // moves the element again
  EXPECT_EQ(ops.memory().liveBytes(), 32);
  Buffer<float> c = ops.allocate(2);
  kept[0] = std::move(c); // releases the first
  EXPECT_EQ(ops.memory().liveBytes(), 8);
  kept.clear();
  EXPECT_EQ(ops.memory().liveBytes(), 0);
  // A buffer an Ops did not allocate is not counted.
  Buffer<float> outside(new float[4](), 4, [](float *p) { delete[] p; });
  EXPECT_EQ(ops.memory().liveBytes(), 0);
}

// A stage's forward keeps its layers' caches and nothing else; its backward releases them and
// every transient, so the count returns to where it began.
TEST(MemoryCounterTest, AForwardKeepsItsCachesAndTheBackwardReleasesAll) {
  runtime::Plan plan = planFor(tinyShape());
  absl::StatusOr<GptShape> shape = GptShape::fromPlan(plan);
  ASSERT_TRUE(shape.ok()) << shape.status();
  CpuOps<float> ops;
  const int64_t layers = static_cast<int64_t>(plan.layers.size());
  absl::StatusOr<LayerChain<float>> chain = LayerChain<float>::build(plan, *shape, 0, layers, ops);
  ASSERT_TRUE(chain.ok()) << chain.status();
  MemoryScope state(ops.memory(), MemoryUse::Parameters);
  Buffer<float> params = ops.allocate(chain->numParams());
  chain->initialise(params.data(), 1);
  Buffer<double> grads = ops.allocateDouble(chain->numParams());
  const int64_t before = ops.memory().liveBytes();

  const int64_t samples = 2;
  std::vector<int32_t> tokens(samples * shape->seq), targets(samples * shape->seq);
  for (size_t i = 0; i < tokens.size(); ++i) {
    tokens[i] = static_cast<int32_t>(i % shape->vocab);
    targets[i] = static_cast<int32_t>((i + 1) % shape->vocab);
  }
  Tokens batch{tokens.data(), targets.data(), samples, 1.0 / static_cast<double>(tokens.size())};
  std::vector<LayerChain<float>::Cache> caches;
  {
    MemoryScope saved(ops.memory(), MemoryUse::Activations);
    chain->forwardSamples(params.data(), nullptr, batch, nullptr, caches);
  }
  // What the layers keep: the embedding nothing counted (tokens stay on the host), each block
  // and the head what GptShape::activationElements bounds.
  const int64_t kept = ops.memory().liveBytes(MemoryUse::Activations);
  EXPECT_GT(kept, 0);
  EXPECT_EQ(ops.memory().liveBytes(MemoryUse::Working), 0);
  std::optional<int64_t> bound = shape->activationElements(samples, shape->blocks, true);
  ASSERT_TRUE(bound.has_value());
  EXPECT_LE(kept, *bound * static_cast<int64_t>(sizeof(float)));
  EXPECT_EQ(ops.memory().liveBytes(), before + kept);

  chain->backwardSamples(params.data(), caches, nullptr, grads.data(), nullptr);
  EXPECT_EQ(ops.memory().liveBytes(), before);
  EXPECT_EQ(ops.memory().heldBytes(), before);
}

// With full checkpointing a forward keeps each layer's input and no cache (the embedding's
// tokens stay on the host), and its backward holds one layer's recomputed cache at a time:
// less than the caches a forward keeps without it. Selective checkpointing keeps those caches
// less the blocks' attention probabilities. `blocks` keeps the blocks' inputs as full does and
// the head's cache as none does. Every way the backward releases everything and computes the
// same gradients.
TEST(MemoryCounterTest, CheckpointingKeepsLayerInputsOrAllButTheProbabilities) {
  GptShape shape = tinyShape();
  shape.blocks = 4;
  runtime::Plan plan = planFor(shape);
  const int64_t layers = static_cast<int64_t>(plan.layers.size()), samples = 2;
  std::vector<int32_t> tokens(samples * shape.seq), targets(samples * shape.seq);
  for (size_t i = 0; i < tokens.size(); ++i) {
    tokens[i] = static_cast<int32_t>(i % shape.vocab);
    targets[i] = static_cast<int32_t>((i + 1) % shape.vocab);
  }
  const Tokens batch{tokens.data(), targets.data(), samples, 1.0};
  struct Measured {
    int64_t kept = 0, backwardPeak = 0;
    std::vector<double> grads;
  };
  auto measure = [&](Checkpointing mode) {
    CpuOps<float> ops;
    LayerChain<float> chain = *LayerChain<float>::build(plan, shape, 0, layers, ops, mode);
    std::vector<float> params(chain.numParams());
    chain.initialise(params.data(), 1);
    std::vector<double> grads(chain.numParams());
    std::vector<LayerChain<float>::Cache> caches;
    {
      MemoryScope saved(ops.memory(), MemoryUse::Activations);
      chain.forwardSamples(params.data(), nullptr, batch, nullptr, caches);
    }
    Measured m;
    m.kept = ops.memory().liveBytes();
    EXPECT_EQ(ops.memory().liveBytes(MemoryUse::Activations), m.kept);
    ops.memory().resetPeak();
    chain.backwardSamples(params.data(), caches, nullptr, grads.data(), nullptr);
    m.backwardPeak = ops.memory().peak().countedBytes;
    EXPECT_EQ(ops.memory().liveBytes(), 0);
    m.grads = std::move(grads);
    return m;
  };
  const Measured none = measure(Checkpointing::None), full = measure(Checkpointing::Full),
                 selective = measure(Checkpointing::Selective),
                 blocks = measure(Checkpointing::Blocks);
  for (const Measured *m : {&full, &selective, &blocks})
    EXPECT_EQ(m->grads, none.grads);
  const int64_t row = shape.seq * shape.hidden * static_cast<int64_t>(sizeof(float));
  EXPECT_EQ(full.kept, samples * (shape.blocks + 1) * row);
  EXPECT_LT(full.backwardPeak, none.kept);
  const int64_t probs = shape.heads * shape.seq * shape.seq * static_cast<int64_t>(sizeof(float));
  EXPECT_EQ(selective.kept, none.kept - samples * shape.blocks * probs);
  // The head's cache in place of its input: more than full keeps, less than none.
  EXPECT_GT(blocks.kept, full.kept);
  EXPECT_LT(blocks.kept, none.kept);
  EXPECT_LT(blocks.backwardPeak, none.kept);
}

} // namespace
