//===- UnitsTest.cpp - human-readable figures ------------------------------===//

#include "analysis/Units.h"

#include <gtest/gtest.h>

using namespace conduit;

TEST(Units, SecondsInTheMostReadableUnit) {
  EXPECT_EQ(formatSeconds(4.56), "4.56 s");
  EXPECT_EQ(formatSeconds(123.4), "123 s");
  EXPECT_EQ(formatSeconds(0.0123), "12.3 ms");
  EXPECT_EQ(formatSeconds(4.5e-5), "45.0 us");
  EXPECT_EQ(formatSeconds(7e-9), "7.00 ns");
  EXPECT_EQ(formatSeconds(-0.25), "-250 ms");
}

TEST(Units, WhatRoundsToNothingIsZeroSeconds) {
  EXPECT_EQ(formatSeconds(0), "0 s");
  // A bubble computed as the difference of two sums that cancel, off by rounding.
  EXPECT_EQ(formatSeconds(0.1 + 0.2 - 0.3), "0 s");
  EXPECT_EQ(formatSeconds(3e-12), "0 s");
  EXPECT_EQ(formatSeconds(6e-12), "0.01 ns");
}

TEST(Units, BytesCountsAndRates) {
  EXPECT_EQ(formatBytes(16), "16 B");
  EXPECT_EQ(formatBytes(1536), "1.50 KiB");
  EXPECT_EQ(formatCount(1234567), "1.23 M");
  EXPECT_EQ(formatRate(3.12e14, "FLOP/s"), "312 TFLOP/s");
}
