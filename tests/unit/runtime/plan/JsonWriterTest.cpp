//===- JsonWriterTest.cpp - JSON literals of the runtime's outputs --------===//
//
// Every string the runtime writes into JSON (plan dump, trace, profile) is escaped as RFC 8259
// requires: quotation mark, reverse solidus and every control character, so that any job or
// layer name gives a file a JSON parser reads back as it was.
//
//===----------------------------------------------------------------------===//

#include "runtime/plan/JsonWriter.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

using namespace conduit::runtime;

TEST(JsonWriter, PlainTextIsQuoted) {
  EXPECT_EQ(jsonString(""), "\"\"");
  EXPECT_EQ(jsonString("demo"), "\"demo\"");
}

TEST(JsonWriter, QuoteAndBackslashAreEscaped) {
  EXPECT_EQ(jsonString("a\"b"), "\"a\\\"b\"");
  EXPECT_EQ(jsonString("C:\\jobs"), "\"C:\\\\jobs\"");
}

TEST(JsonWriter, NamedControlCharactersUseTheirShortEscapes) {
  EXPECT_EQ(jsonString("\b\f\n\r\t"), "\"\\b\\f\\n\\r\\t\"");
}

TEST(JsonWriter, EveryOtherControlCharacterIsAUnicodeEscape) {
  for (int c = 0; c < 0x20; ++c) {
    if (c == '\b' || c == '\f' || c == '\n' || c == '\r' || c == '\t')
      continue;
    const std::string text(1, static_cast<char>(c));
    char expected[16];
    std::snprintf(expected, sizeof expected, "\"\\u%04x\"", c);
    EXPECT_EQ(jsonString(text), expected) << "character " << c;
  }
  // NUL inside a string is kept, escaped, rather than ending it.
  EXPECT_EQ(jsonString(std::string("a\0b", 3)), "\"a\\u0000b\"");
}

TEST(JsonWriter, OtherBytesArePassedThrough) {
  // DEL needs no escape; UTF-8 is copied byte for byte.
  EXPECT_EQ(jsonString("\x7f"), "\"\x7f\"");
  EXPECT_EQ(jsonString("bloc\xc3\xa9"), "\"bloc\xc3\xa9\"");
}

TEST(JsonWriter, AppendsToWhatIsThere) {
  std::string out = "[";
  appendJsonString(out, "x\n");
  EXPECT_EQ(out, "[\"x\\n\"");
}

TEST(JsonWriter, NumbersAreJson) {
  EXPECT_EQ(jsonNumber(0.5), "0.5");
  EXPECT_EQ(jsonNumber(4.1e-09), "4.1e-09");
  EXPECT_EQ(jsonNumber(1.0 / 3.0, 3), "0.333");
  EXPECT_EQ(jsonNumber(std::numeric_limits<double>::quiet_NaN()), "null");
  EXPECT_EQ(jsonNumber(std::numeric_limits<double>::infinity()), "null");
}
