//===- JsonReaderTest.cpp - the guards, the parser and integers of JSON ---===//
//
// The guards around nlohmann's parser (depth, duplicate keys), where a syntax error is said to
// be and in whose words, and the integers every reader takes through jsonInteger: the values
// at the edge of int64, where a plain conversion of the double 2^63 would overflow.
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
std::string problemIn(std::string_view text, JsonLimits limits = {}) {
  Diagnostics diag("value.json");
  EXPECT_FALSE(parseJsonText(text, diag, limits)) << text;
  return diag.failed() ? diag.getError()->message : "";
}

TEST(JsonReader, RejectsDeepNesting) {
  // Refused at the bracket that passes the limit, before anything deeper is built.
  Diagnostics diag("x.json");
  std::string deep(100000, '[');
  EXPECT_FALSE(parseJsonText(deep, diag));
  EXPECT_EQ(diag.getError()->message, "JSON nesting is deeper than 64 levels");
  Diagnostics ok("y.json");
  EXPECT_TRUE(parseJsonText(std::string(64, '[') + std::string(64, ']'), ok));
  EXPECT_EQ(problemIn(std::string(65, '[') + std::string(65, ']')),
            "JSON nesting is deeper than 64 levels");
  EXPECT_EQ(problemIn("{\"a\": [{\"b\": [[]]}]}", JsonLimits{1 << 20, 4}),
            "JSON nesting is deeper than 4 levels");
}

TEST(JsonReader, RejectsDuplicateKeys) {
  Diagnostics diag("x.json");
  EXPECT_FALSE(parseJsonText("{\"a\": {\"b\": 1,\n \"b\": 2}}", diag));
  EXPECT_EQ(diag.getError()->message, "duplicate key \"b\" at line 2");
  // Keys are compared as read, escapes resolved.
  EXPECT_EQ(problemIn("{\"k\\u0062\": 1,\n\n \"kb\": 2}"), "duplicate key \"kb\" at line 3");
  Diagnostics ok("y.json");
  EXPECT_TRUE(parseJsonText(R"({"a": {"b": 1}, "c": {"b": 2}, "d": ["b", "b"]})", ok));
}

TEST(JsonReader, SyntaxErrorsSayWhere) {
  // Columns count bytes from 1 on the line: the byte at which the parser found the problem,
  // one past the end when the text stops early. What follows is nlohmann's description.
  EXPECT_EQ(problemIn(""), "invalid JSON at line 1, column 1: syntax error while parsing value - "
                           "unexpected end of input; expected '[', '{', or a literal");
  EXPECT_EQ(problemIn("{\"a\": 1,}"), "invalid JSON at line 1, column 9: syntax error while "
                                      "parsing object key - unexpected '}'; expected string "
                                      "literal");
  EXPECT_EQ(problemIn("{\n  \"a\": [1 2]\n}"),
            "invalid JSON at line 2, column 11: syntax error while parsing array - unexpected "
            "number literal; expected ']'");
  EXPECT_EQ(problemIn("[1,\n 2"), "invalid JSON at line 2, column 3: syntax error while parsing "
                                  "array - unexpected end of input; expected ']'");
  // The byte that is not UTF-8 is quoted as U+FFFD: the message itself is UTF-8.
  EXPECT_EQ(problemIn("{\"a\": \"\xff\"}"),
            "invalid JSON at line 1, column 8: syntax error while parsing value - invalid string: "
            "ill-formed UTF-8 byte; last read: '\"\xef\xbf\xbd'");
  EXPECT_EQ(problemIn("[nul]"), "invalid JSON at line 1, column 5: syntax error while parsing "
                                "value - invalid literal; last read: '[nul]'");
  EXPECT_EQ(problemIn("1 2"), "invalid JSON at line 1, column 3: syntax error while parsing value "
                              "- unexpected number literal; expected end of input");
  EXPECT_EQ(problemIn("\"\\x\""), "invalid JSON at line 1, column 3: syntax error while parsing "
                                  "value - invalid string: forbidden character after backslash; "
                                  "last read: '\"\\x'");
  EXPECT_EQ(problemIn("[1.5e]"), "invalid JSON at line 1, column 6: syntax error while parsing "
                                 "value - invalid number; expected '+', '-', or digit after "
                                 "exponent; last read: '1.5e]'");
  // A raw line break in a string is placed on its own line, not the next.
  EXPECT_EQ(problemIn("\"ab\ncd\""),
            "invalid JSON at line 1, column 4: syntax error while parsing value - invalid string: "
            "control character U+000A (LF) must be escaped to \\u000A or \\n; last read: "
            "'\"ab<U+000A>'");
  // A long token is quoted shortened.
  EXPECT_EQ(problemIn("\"" + std::string(100, 'x') + "\xff\""),
            "invalid JSON at line 1, column 102: syntax error while parsing value - invalid "
            "string: ill-formed UTF-8 byte; last read: '\"" +
                std::string(39, 'x') + "...'");
}

TEST(JsonReader, StringsAndNumbersAsWritten) {
  Diagnostics diag("value.json");
  std::optional<Json> value = parseJsonText(
      R"(["\u00e9\ud83d\ude00", -0, 18446744073709551615, -9223372036854775809])", diag);
  ASSERT_TRUE(value) << diag.getError()->str();
  EXPECT_EQ((*value)[0], "\xc3\xa9\xf0\x9f\x98\x80");
  EXPECT_EQ(jsonInteger((*value)[1]), 0);
  EXPECT_TRUE((*value)[2].is_number_unsigned());
  EXPECT_TRUE((*value)[3].is_number_float());
  // An unpaired surrogate is not Unicode, and a number too large for a double is not read.
  EXPECT_EQ(
      problemIn(R"(["\ud800"])"),
      "invalid JSON at line 1, column 9: syntax error while parsing value - invalid string: "
      "surrogate U+D800..U+DBFF must be followed by U+DC00..U+DFFF; last read: '\"\\ud800\"'");
  EXPECT_EQ(problemIn("[1, 1e400]"),
            "invalid JSON at line 1, column 9: number overflow parsing '1e400'");
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
  // fixUtf8 repairs text the way writeJson does: one U+FFFD per stray byte or cut sequence.
  EXPECT_EQ(fixUtf8("\xa1x\xe2\x82"), "\xef\xbf\xbdx\xef\xbf\xbd");
  EXPECT_EQ(fixUtf8("\xc3\xa9\"\\\n"), "\xc3\xa9\"\\\n"); // UTF-8 and escapes kept
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
