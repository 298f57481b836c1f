// Tests for src/kvprof/util/net.cpp: which hosts count as loopback.
#include "kvprof/util/net.hpp"

#include <gtest/gtest.h>

namespace kvprof {
namespace {

TEST(Net, LoopbackHostsAreRecognised) {
  EXPECT_TRUE(is_loopback_host("127.0.0.1"));
  EXPECT_TRUE(is_loopback_host("127.1.2.3"));
  EXPECT_TRUE(is_loopback_host("127.255.255.255"));
  EXPECT_TRUE(is_loopback_host("127.000.0.01"));
  EXPECT_TRUE(is_loopback_host("localhost"));
  EXPECT_TRUE(is_loopback_host("LOCALHOST"));
  EXPECT_TRUE(is_loopback_host("LocalHost"));
  EXPECT_TRUE(is_loopback_host("::1"));
  EXPECT_TRUE(is_loopback_host("[::1]"));
}

TEST(Net, OtherHostsAreNotLoopback) {
  EXPECT_FALSE(is_loopback_host(""));
  EXPECT_FALSE(is_loopback_host("128.0.0.1"));
  EXPECT_FALSE(is_loopback_host("10.0.0.1"));
  EXPECT_FALSE(is_loopback_host("0.0.0.0"));
  EXPECT_FALSE(is_loopback_host("example.com"));
  EXPECT_FALSE(is_loopback_host("localhost.evil.com"));
  EXPECT_FALSE(is_loopback_host("127.0.0.1.nip.io"));
  EXPECT_FALSE(is_loopback_host("127.evil.com"));
  EXPECT_FALSE(is_loopback_host("127.0.0.256"));
  EXPECT_FALSE(is_loopback_host("127.0.0.1000"));
  EXPECT_FALSE(is_loopback_host("127.0.0"));
  EXPECT_FALSE(is_loopback_host("127.0.0."));
  EXPECT_FALSE(is_loopback_host("127..0.1"));
  EXPECT_FALSE(is_loopback_host("127.0.0.1 "));
  EXPECT_FALSE(is_loopback_host("127.0.0.-1"));
  EXPECT_FALSE(is_loopback_host("127"));
  EXPECT_FALSE(is_loopback_host("::2"));
  EXPECT_FALSE(is_loopback_host("[::1"));
}

}  // namespace
}  // namespace kvprof
