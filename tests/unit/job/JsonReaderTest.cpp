//===- JsonReaderTest.cpp - the guards, the parser and integers of JSON ---===//
//
// The guards that run before parsing (depth, duplicate keys), where the parser says a problem
// is, and the integers every reader takes through jsonInteger: the values at the edge of
// int64, where a plain conversion of the double 2^63 would overflow.
//
//===----------------------------------------------------------------------===//

#include "job/JsonReader.h"

#include <gtest/gtest.h>

#include <limits>

using namespace conduit;

namespace {

std::optional<int64_t> integerIn(std::string_view text) {
  Diagnostics diag("value.json");
  std::optional<Json> value = parseJsonText(text, diag);
  EXPECT_TRUE(value) << text;
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
  std::optional<Json> value = parseJsonText("9223372036854775807.0", diag);
  ASSERT_TRUE(value);
  EXPECT_EQ(describeJson(*value), "9.22337e+18");
}

/// The diagnostic of `text`, which must not parse.
std::string problemIn(std::string_view text) {
  Diagnostics diag("value.json");
  EXPECT_FALSE(parseJsonText(text, diag)) << text;
  return diag.failed() ? diag.getError()->message : "";
}

TEST(JsonReader, RejectsDeepNestingBeforeParsing) {
  Diagnostics diag("x.json");
  std::string deep(100000, '[');
  EXPECT_FALSE(parseJsonText(deep, diag));
  EXPECT_EQ(diag.getError()->message, "JSON nesting is deeper than 64 levels");
}

TEST(JsonReader, RejectsDuplicateKeys) {
  Diagnostics diag("x.json");
  EXPECT_FALSE(parseJsonText("{\"a\": {\"b\": 1,\n \"b\": 2}}", diag));
  EXPECT_EQ(diag.getError()->message, "duplicate key \"b\" at line 2");
  Diagnostics ok("y.json");
  EXPECT_TRUE(parseJsonText(R"({"a": {"b": 1}, "c": {"b": 2}, "d": ["b", "b"]})", ok));
}

TEST(JsonReader, SyntaxErrorsSayWhere) {
  // Columns count bytes from 0 on the line; the position is where the problem was noticed.
  EXPECT_EQ(problemIn(""), "invalid JSON at line 1, column 0: unexpected EOF");
  EXPECT_EQ(problemIn("{\"a\": 1,}"), "invalid JSON at line 1, column 9: expected object key");
  EXPECT_EQ(problemIn("{\n  \"a\": [1 2]\n}"),
            "invalid JSON at line 2, column 11: expected , or ] after array element");
  EXPECT_EQ(problemIn("{\"a\": \"\xff\"}"),
            "invalid JSON at line 1, column 7: invalid UTF-8 sequence");
  EXPECT_EQ(problemIn("[nul]"), "invalid JSON at line 1, column 5: invalid JSON value (null?)");
  EXPECT_EQ(problemIn("1 2"), "invalid JSON at line 1, column 2: text after end of document");
  EXPECT_EQ(problemIn("\"\\x\""), "invalid JSON at line 1, column 3: invalid escape sequence");
  EXPECT_EQ(problemIn("[1.5e]"), "invalid JSON at line 1, column 5: invalid JSON value (number?)");
}

TEST(JsonReader, StringsAndNumbersAsWritten) {
  Diagnostics diag("value.json");
  std::optional<Json> value =
      parseJsonText(R"(["\u00e9\ud83d\ude00", "\ud800", -0, 1e400, 18446744073709551615])", diag);
  ASSERT_TRUE(value) << diag.getError()->str();
  EXPECT_EQ((*value)[0], "\xc3\xa9\xf0\x9f\x98\x80");
  EXPECT_EQ((*value)[1], "\xef\xbf\xbd"); // an unpaired surrogate becomes U+FFFD
  EXPECT_EQ(jsonInteger((*value)[2]), 0);
  EXPECT_EQ(describeJson((*value)[3]), "inf"); // too large for a double: readers refuse it
  EXPECT_TRUE((*value)[4].is_number_unsigned());
}

TEST(JsonReader, WrittenJsonReadsBackTheSame) {
  Diagnostics diag("value.json");
  std::optional<Json> value = parseJsonText(
      R"({"b": [0.1, 1e-7, 3.0, 12345678901234567], "a": {"x": "\"q\"\n"}, "c": []})", diag);
  ASSERT_TRUE(value);
  const std::string text = writeJson(*value);
  EXPECT_LT(text.find("\"a\""), text.find("\"b\"")); // keys sorted
  std::optional<Json> again = parseJsonText(text, diag);
  ASSERT_TRUE(again) << diag.getError()->str();
  EXPECT_EQ(*again, *value);
  EXPECT_EQ(writeJson(Json("\xa1x"), -1), "\"\xef\xbf\xbdx\""); // not UTF-8: replaced
}

TEST(JsonReader, UnknownKeysSuggestTheClosest) {
  Diagnostics diag("value.json");
  Json object = {{"pipelnie", 2}};
  ObjectReader reader(object, "parallelism", diag);
  (void)reader.integer("pipeline", 1, 8);
  (void)reader.integer("data", 1, 8);
  reader.rejectUnknownKeys();
  ASSERT_TRUE(diag.failed());
  EXPECT_EQ(diag.getError()->str(),
            "value.json: parallelism.pipelnie: unknown key (did you mean \"pipeline\"?); expected "
            "one of \"data\", \"pipeline\"");
}

} // namespace
