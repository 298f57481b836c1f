#include "kvprof/util/strings.hpp"

#include <gtest/gtest.h>

#include "kvprof/util/units.hpp"

namespace kvprof {
namespace {

TEST(Strings, SplitKeepsEmptyFields) {
  EXPECT_EQ(split("a,,b", ','), (std::vector<std::string>{"a", "", "b"}));
  EXPECT_EQ(split("", ','), (std::vector<std::string>{""}));
}

TEST(Strings, ClosestMatchesPrefersContainment) {
  const std::vector<std::string> names{"H100-SXM", "H200", "A100-80GB", "L40S"};
  const auto hints = closest_matches("h10", names);
  ASSERT_FALSE(hints.empty());
  EXPECT_EQ(hints.front(), "H100-SXM");
}

TEST(Units, ParseBytesUnits) {
  EXPECT_EQ(parse_bytes("24GiB").value(), 24 * k_gib);
  EXPECT_EQ(parse_bytes("24 gib").value(), 24 * k_gib);
  EXPECT_EQ(parse_bytes("24G").value(), 24 * k_gib);
  EXPECT_EQ(parse_bytes("80GB").value(), 80'000'000'000ULL);
  EXPECT_EQ(parse_bytes("512MiB").value(), 512 * k_mib);
  EXPECT_EQ(parse_bytes("1000").value(), 1000U);
  EXPECT_EQ(parse_bytes("1.5GiB").value(), 3 * k_gib / 2);
}

TEST(Units, ParseBytesRejectsGarbage) {
  EXPECT_FALSE(parse_bytes("").has_value());
  EXPECT_FALSE(parse_bytes("GiB").has_value());
  EXPECT_FALSE(parse_bytes("12 parsecs").has_value());
  EXPECT_EQ(parse_bytes("12 parsecs").error().kind, ErrorKind::input);
  EXPECT_FALSE(parse_bytes("1e30GiB").has_value());
}

TEST(Units, ParseCount) {
  EXPECT_EQ(parse_count("8192").value(), 8192U);
  EXPECT_EQ(parse_count("8k").value(), 8000U);  // vLLM's rules: lowercase is decimal
  EXPECT_EQ(parse_count("8K").value(), 8192U);
  EXPECT_EQ(parse_count("32K").value(), 32768U);
  EXPECT_EQ(parse_count("25.6k").value(), 25600U);
  EXPECT_EQ(parse_count("1m").value(), 1000000U);
  EXPECT_EQ(parse_count("1M").value(), 1048576U);
  EXPECT_EQ(parse_count("1.005k").value(), 1004U);  // int(1.005 * 1000) in vLLM's Python too
  EXPECT_EQ(parse_count(" 128 ").value(), 128U);
  const auto binary_decimal = parse_count("1.5K");
  ASSERT_FALSE(binary_decimal);
  EXPECT_NE(binary_decimal.error().message.find("did you mean 1.5k"), std::string::npos);
  EXPECT_FALSE(parse_count("2T").has_value());  // over 2^40
  EXPECT_TRUE(parse_count("1T").has_value());
  EXPECT_FALSE(parse_count("k").has_value());
  EXPECT_FALSE(parse_count("1.k").has_value());
  EXPECT_FALSE(parse_count(".5k").has_value());
  EXPECT_FALSE(parse_count("8kk").has_value());
  EXPECT_FALSE(parse_count("-1").has_value());
  EXPECT_FALSE(parse_count("12x").has_value());
}

TEST(Units, FormatBytes) {
  EXPECT_EQ(format_bytes(3 * k_gib / 2), "1.50 GiB");
  EXPECT_EQ(format_bytes(512 * k_mib, 1, true), "512.0 MiB");
}

}  // namespace
}  // namespace kvprof
