//===- GemmModelTest.cpp - the shape of the GEMM model ---------------------===//
//
// The time the cost model gives a GEMM on a preset's device (analysis/Roofline.h): calibrated
// to the measured largest-GEMM ceiling at the shape it was measured at, monotone in every
// dimension, saturating toward the ceiling and never above it, with the steps of wave
// quantization and the losses of small k and narrow outputs; without the device's kernels, the
// plain roofline.
//
//===----------------------------------------------------------------------===//

#include "analysis/Roofline.h"

#include <gtest/gtest.h>

using namespace conduit;

namespace {

const Cluster &preset(std::string_view name) {
  for (const Cluster &c : clusterPresets())
    if (c.preset == name)
      return c;
  ADD_FAILURE() << "no preset " << name;
  return clusterPresets().front();
}

/// The fraction of the ceiling (peak times efficiency) a GEMM reaches.
double ofCeiling(const Roofline &r, double m, double n, double k, double batch = 1) {
  Gemm g{m, n, k, batch, Grows::Rows, false};
  return g.flops() / r.time(g, 1) / r.flopRate;
}

TEST(GemmModelTest, ReproducesTheMeasuredCeilingWhereItWasMeasured) {
  for (std::string_view name : {"a100-80gb", "h100-80gb", "h200-141gb"}) {
    const Cluster &c = preset(name);
    Roofline r = Roofline::of(c, 2);
    ASSERT_GT(r.smRate, 0) << name;
    const DeviceKernels &k = c.kernels;
    EXPECT_NEAR(ofCeiling(r, k.ceilingM, k.ceilingN, k.ceilingK), 1.0, 1e-9) << name;
  }
}

TEST(GemmModelTest, MonotoneInEachDimension) {
  for (std::string_view name : {"a100-80gb", "h100-80gb"}) {
    Roofline r = Roofline::of(preset(name), 2);
    for (double base : {256.0, 2048.0, 8192.0})
      for (int dim = 0; dim < 4; ++dim) {
        double previous = 0;
        for (double x = 16; x <= 20000; x += 16) {
          double shape[4] = {base, base, base, 1};
          shape[dim] = dim == 3 ? x / 16 : x;
          Gemm g{shape[0], shape[1], shape[2], shape[3], Grows::Rows, false};
          const double time = r.time(g, 1);
          ASSERT_GE(time, previous) << name << " dimension " << dim << " at " << x;
          previous = time;
        }
      }
  }
}

TEST(GemmModelTest, SaturatesTowardTheCeilingNeverAbove) {
  for (std::string_view name : {"a100-80gb", "h100-80gb"}) {
    Roofline r = Roofline::of(preset(name), 2);
    // Square GEMMs in powers of two: small ones far below, large ones within 15% of the
    // ceiling, none above it.
    double previous = 0;
    for (double size = 256; size <= 16384; size *= 2) {
      const double fraction = ofCeiling(r, size, size, size);
      EXPECT_LE(fraction, 1.0 + 1e-12) << name << " " << size;
      EXPECT_GT(fraction, previous * 0.98) << name << " " << size;
      previous = fraction;
    }
    EXPECT_LT(ofCeiling(r, 512, 512, 512), 0.2) << name;
    EXPECT_GT(ofCeiling(r, 16384, 16384, 16384), 0.85) << name;
  }
}

TEST(GemmModelTest, OneTileMoreThanAFullWaveStepsUnlessTheLastWaveIsBalanced) {
  // A100's library runs whole waves; Hopper's balances the last one (stream-K): one tile more
  // than a full wave then costs its share of the work, and nothing steps.
  for (std::string_view name : {"a100-80gb", "h100-80gb"}) {
    const Cluster &c = preset(name);
    Roofline r = Roofline::of(c, 2);
    const DeviceKernels &k = c.kernels;
    EXPECT_EQ(k.streamK, name == "h100-80gb");
    // Products of two tiles each (256 x 256, whichever way the tile lies), as many as fill the
    // SMs once: one wave. One product more: 2% more work.
    const double side = static_cast<double>(std::max(k.tileM, k.tileN));
    const double half = static_cast<double>(k.sms / 2);
    Gemm oneWave{side, side, 512, half, Grows::Batch, false};
    Gemm oneMore{side, side, 512, half + 1, Grows::Batch, false};
    Gemm twoWaves{side, side, 512, 2 * half, Grows::Batch, false};
    if (k.streamK) {
      EXPECT_NEAR(r.computeTime(oneMore) / r.computeTime(oneWave), (half + 1) / half, 1e-9);
      EXPECT_NEAR(r.computeTime(twoWaves) / r.computeTime(oneWave), 2.0, 1e-9);
      continue;
    }
    // A second wave runs two tiles: twice the time, and filling it costs nothing more.
    EXPECT_NEAR(r.computeTime(oneMore) / r.computeTime(oneWave), 2.0, 1e-9) << name;
    EXPECT_DOUBLE_EQ(r.computeTime(twoWaves), r.computeTime(oneMore)) << name;
  }
}

TEST(GemmModelTest, SmallKAndNarrowOutputsRunBelowTheCeiling) {
  for (std::string_view name : {"a100-80gb", "h100-80gb"}) {
    Roofline r = Roofline::of(preset(name), 2);
    // The attention scores' product, k = the head dimension: each tile's epilogue is a large
    // part of its time.
    EXPECT_LT(ofCeiling(r, 2048, 2048, 128, 64), 0.6 * ofCeiling(r, 2048, 2048, 8192, 64)) << name;
    // An output 16 wide is memory-bound: its time is its bytes at the bandwidth.
    Gemm narrow{8192, 16, 8192, 1, Grows::Rows, false};
    EXPECT_DOUBLE_EQ(r.time(narrow, 1), narrow.bytes(2) / r.memoryBandwidth) << name;
    // Few tiles and a long k: split along k over the idle SMs rather than one SM per tile.
    Gemm fewTiles{256, 256, 65536, 1, Grows::Rows, false};
    EXPECT_GT(fewTiles.flops() / r.computeTime(fewTiles) / r.flopRate, 0.3) << name;
  }
}

TEST(GemmModelTest, WithoutTheDevicesKernelsThePlainRoofline) {
  Cluster c = preset("a100-80gb");
  c.kernels = {};
  Roofline r = Roofline::of(c, 2);
  Gemm g{2048, 2048, 2048, 1, Grows::Rows, false};
  EXPECT_DOUBLE_EQ(r.time(g, 1), g.flops() / (c.peakFlops * c.efficiency));
  // And a preset's kernels are found by its name only.
  EXPECT_EQ(presetKernels("h100-80gb").sms, 132);
  EXPECT_EQ(presetKernels("no-such-device").sms, 0);
}

} // namespace
