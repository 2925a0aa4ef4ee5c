//===- JsonReaderTest.cpp - integers and descriptions of JSON values ------===//
//
// Every reader takes its integers through jsonInteger; these are the values at the edge of
// int64, where llvm::json::Value::getAsInteger converts the double 2^63 and overflows.
//
//===----------------------------------------------------------------------===//

#include "analysis/JsonReader.h"

#include <gtest/gtest.h>

#include <limits>

using namespace conduit;

namespace {

std::optional<int64_t> integerIn(llvm::StringRef text) {
  Diagnostics diag("value.json");
  std::optional<llvm::json::Value> value = parseJsonText(text, diag);
  EXPECT_TRUE(value) << text.str();
  return value ? jsonInteger(*value) : std::nullopt;
}

TEST(JsonReader, IntegersAtTheEdgesOfInt64) {
  EXPECT_EQ(integerIn("9223372036854775807"), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(integerIn("-9223372036854775808"), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(integerIn("-9223372036854775808.0"), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(integerIn("12.0"), 12);
  EXPECT_EQ(integerIn("1e3"), 1000);
}

TEST(JsonReader, NumbersThatAreNotInt64) {
  // 2^63 as a double: found by fuzz-profile (seed testdata/fuzz/profile/time-two-to-the-63.json).
  EXPECT_EQ(integerIn("9223372036854775807.0"), std::nullopt);
  EXPECT_EQ(integerIn("9223372036854775808"), std::nullopt);
  EXPECT_EQ(integerIn("18446744073709551615"), std::nullopt);
  EXPECT_EQ(integerIn("1e300"), std::nullopt);
  EXPECT_EQ(integerIn("-1e19"), std::nullopt);
  EXPECT_EQ(integerIn("0.5"), std::nullopt);
  EXPECT_EQ(integerIn("\"7\""), std::nullopt);
}

TEST(JsonReader, DescribesLargeNumbersWithoutConvertingThem) {
  Diagnostics diag("value.json");
  std::optional<llvm::json::Value> value = parseJsonText("9223372036854775807.0", diag);
  ASSERT_TRUE(value);
  EXPECT_EQ(describeJson(*value), "9.22337e+18");
}

} // namespace
