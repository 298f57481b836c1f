// Stop strings: the answer ends before the first one, text that may start one is held back, and
// a request's "stop" is read with its bounds.
#include "kvprof/serve/stop_strings.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

namespace kvprof::serve {
namespace {

TEST(StopScan, EndsBeforeTheFirstStopStringSplitOverPieces) {
  StopScan scan({"END", "w5"});
  EXPECT_EQ(scan.feed("w1 w2 E"), "w1 w2 ");  // "E" may start "END"
  EXPECT_FALSE(scan.stopped());
  EXPECT_EQ(scan.feed("N"), "");
  EXPECT_EQ(scan.feed("Dw9"), "");
  EXPECT_TRUE(scan.stopped());
  EXPECT_EQ(scan.feed("more"), "");
  EXPECT_EQ(scan.flush(), "");
}

TEST(StopScan, TextThatTurnsOutNotToBeAStopStringGoesOut) {
  StopScan scan({"END"});
  EXPECT_EQ(scan.feed("w1 EN"), "w1 ");
  EXPECT_EQ(scan.feed("X w2"), "ENX w2");
  EXPECT_EQ(scan.feed(" E"), " ");
  EXPECT_FALSE(scan.stopped());
  EXPECT_EQ(scan.flush(), "E");  // the answer ended without a stop string
}

TEST(StopScan, TheEarliestOfSeveralStopStringsWins) {
  StopScan scan({"w3", " w2"});
  EXPECT_EQ(scan.feed("w1 w2 w3"), "w1");
  EXPECT_TRUE(scan.stopped());
  StopScan none({});
  EXPECT_EQ(none.feed("w1 w2"), "w1 w2");
}

TEST(ReadStopStrings, AStringOrAListBoundedInCountAndLength) {
  using nlohmann::json;
  EXPECT_TRUE(read_stop_strings(json::object())->empty());
  EXPECT_TRUE(read_stop_strings(json{{"stop", nullptr}})->empty());
  EXPECT_EQ(*read_stop_strings(json{{"stop", "\n"}}), std::vector<std::string>{"\n"});
  EXPECT_EQ(*read_stop_strings(json{{"stop", {"a", "", "b"}}}),
            (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(read_stop_strings(json{{"stop", 3}}).error().message,
            "'stop' must be a string or a list of strings");
  EXPECT_FALSE(read_stop_strings(json{{"stop", {"a", 1}}}).has_value());
  EXPECT_FALSE(read_stop_strings(json{{"stop", json(std::vector<std::string>(17, "x"))}}));
  EXPECT_FALSE(read_stop_strings(json{{"stop", std::string(1025, 'x')}}).has_value());
  EXPECT_EQ(read_stop_strings(json{{"stop", std::string(1025, 'x')}}).error().kind,
            ErrorKind::input);
}

}  // namespace
}  // namespace kvprof::serve
