// /proc readers: smaps_rollup/status/net-tcp parsers on fixture text, the test's own memory
// against getrusage, and the owner of a port this test listens on.
#include "kvprof/sys/proc.hpp"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "support/loopback_port.hpp"

namespace kvprof::sys {
namespace {

TEST(ProcParse, SmapsRollup) {
  const HostMemory m = parse_smaps_rollup(
      "55d0c0a00000-7ffc3f1fe000 ---p 00000000 00:00 0                          [rollup]\n"
      "Rss:              123456 kB\n"
      "Pss:              100000 kB\n"
      "Pss_Anon:          90000 kB\n"
      "Shared_Clean:       1000 kB\n");
  EXPECT_EQ(m.rss_bytes.value(), 123456ULL * 1024);
  EXPECT_EQ(m.pss_bytes.value(), 100000ULL * 1024);  // not Pss_Anon
}

TEST(ProcParse, StatusAndMalformedValues) {
  EXPECT_EQ(parse_proc_status("Name:\tpython3\nVmPeak:\t 999 kB\nVmRSS:\t   2048 kB\n").rss_bytes,
            2048ULL * 1024);
  EXPECT_FALSE(parse_proc_status("VmRSS:\t  lots kB\n").rss_bytes.has_value());
  EXPECT_FALSE(parse_proc_status("Name: kthreadd\n").rss_bytes.has_value());
  EXPECT_FALSE(parse_smaps_rollup("Rss: 99999999999999999999999 kB\n").rss_bytes.has_value());
}

TEST(ProcParse, NetTcpListenSockets) {
  const std::string text =
      "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout "
      "inode\n"
      "   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 "
      "4242 1 0000000000000000 100 0 0 10 0\n"
      "   1: 0100007F:1F90 0100007F:D431 01 00000000:00000000 00:00000000 00000000  1000        0 "
      "4343 1 0000000000000000 20 4 30 10 -1\n"
      "   2: 00000000:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 "
      "17 1\n"
      "   3: garbage\n"
      "   4: 00000000:ZZZZ 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 "
      "18 1\n";
  const auto sockets = parse_proc_net_tcp(text);
  ASSERT_EQ(sockets.size(), 2U);  // the established one, garbage and a bad port are skipped
  EXPECT_EQ(sockets[0].port, 8080);
  EXPECT_EQ(sockets[0].inode, 4242U);
  EXPECT_EQ(sockets[1].port, 22);
  const std::string v6 =
      "  sl  local_address                         remote_address                        st "
      "tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
      "   0: 00000000000000000000000000000000:1F91 00000000000000000000000000000000:0000 0A "
      "00000000:00000000 00:00000000 00000000  1000        0 5555 1\n";
  const auto s6 = parse_proc_net_tcp(v6);
  ASSERT_EQ(s6.size(), 1U);
  EXPECT_EQ(s6[0].port, 8081);
  EXPECT_EQ(s6[0].inode, 5555U);
}

TEST(ProcSource, OwnProcessRssIsPlausible) {
  // Touch 64 MiB so the numbers are well above noise.
  std::vector<char> block(64 << 20, 1);
  ProcSource source;
  const HostMemory m = source.sample(::getpid()).value();
  EXPECT_EQ(m.pid, ::getpid());
  ASSERT_TRUE(m.rss_bytes.has_value());
  EXPECT_GT(*m.rss_bytes, block.size());
  rusage usage{};
  ASSERT_EQ(::getrusage(RUSAGE_SELF, &usage), 0);
  // The current RSS cannot exceed the high-water mark getrusage reports (KiB).
  const uint64_t max_rss_bytes = static_cast<uint64_t>(usage.ru_maxrss) * 1024;
  EXPECT_LE(*m.rss_bytes, max_rss_bytes + (4 << 20));
  if (m.pss_bytes) {
    EXPECT_LE(*m.pss_bytes, *m.rss_bytes);
  }
  EXPECT_GT(block[12345], 0);
}

TEST(ProcSource, MissingProcessIsNotFound) {
  ProcSource source;
  auto m = source.sample(0x3ffffffe);  // above pid_max
  ASSERT_FALSE(m.has_value());
  EXPECT_EQ(m.error().kind, ErrorKind::not_found);
}

TEST(ProcSource, FallsBackToStatusUnderAFakeProcRoot) {
  const std::string root = ::testing::TempDir() + "/kvprof_fakeproc_" + std::to_string(::getpid());
  ASSERT_EQ(::system(("mkdir -p " + root + "/77 && printf 'VmRSS:\\t 4096 kB\\n' > " + root +
                      "/77/status")
                         .c_str()),
            0);
  ProcSource source(root);
  const HostMemory m = source.sample(77).value();
  EXPECT_EQ(m.rss_bytes.value(), 4096U * 1024);
  EXPECT_FALSE(m.pss_bytes.has_value());
  EXPECT_EQ(::system(("rm -rf " + root).c_str()), 0);
}

TEST(ProcParse, StatProcessGroupEvenWithParenthesesInTheName) {
  EXPECT_EQ(parse_proc_stat_pgrp("4242 (vllm) S 1 4240 4240 0 -1 4194560"), 4240);
  EXPECT_EQ(parse_proc_stat_pgrp("77 (a) b (c) R 5 76 76 0"), 76);
  EXPECT_FALSE(parse_proc_stat_pgrp("77 (a) R 5"));
  EXPECT_FALSE(parse_proc_stat_pgrp("77 a R 5 76"));
  EXPECT_FALSE(parse_proc_stat_pgrp("77 (a) R 5 -3 0"));
}

TEST(ProcSource, ProcessGroupSumsEveryMember) {
  // A group leader that forks a worker holding 64 MiB, like a server and its engine process.
  constexpr size_t k_worker_bytes = 64ULL << 20;
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t leader = ::fork();
  ASSERT_GE(leader, 0);
  if (leader == 0) {
    ::setpgid(0, 0);
    if (::fork() == 0) {
      auto* block = static_cast<char*>(std::malloc(k_worker_bytes));
      std::memset(block, 1, k_worker_bytes);
      // Written from the block, so the compiler keeps the allocation and every page of it.
      (void)!::write(ready[1], block + k_worker_bytes - 1, 1);
      ::pause();
      ::_exit(0);
    }
    ::pause();
    ::_exit(0);
  }
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  ::close(ready[0]);
  ::close(ready[1]);
  ProcSource proc;
  EXPECT_EQ(proc.group_members(leader).size(), 2U);
  auto group = proc.sample_group(leader);
  auto alone = proc.sample(leader);
  ::kill(-leader, SIGKILL);
  ::waitpid(leader, nullptr, 0);
  ASSERT_TRUE(group) << group.error().message;
  ASSERT_TRUE(alone);
  EXPECT_EQ(group->pid, leader);
  EXPECT_GE(*group->rss_bytes, k_worker_bytes);
  EXPECT_GE(*group->rss_bytes, *alone->rss_bytes + k_worker_bytes / 2);
  for (int i = 0; i < 100 && proc.sample_group(leader); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  auto gone = proc.sample_group(leader);
  ASSERT_FALSE(gone);
  EXPECT_EQ(gone.error().kind, ErrorKind::not_found);
}

TEST(FindListeningPid, FindsThisProcessForItsOwnSocket) {
  test::LoopbackPort listening(/*listen=*/true);
  ASSERT_TRUE(listening.ok());
  const uint16_t port = listening.port();

  auto pid = find_listening_pid(port);
  ASSERT_TRUE(pid.has_value()) << pid.error().message;
  EXPECT_EQ(*pid, ::getpid());
  listening.close();

  auto gone = find_listening_pid(port);
  ASSERT_FALSE(gone.has_value());
  EXPECT_EQ(gone.error().kind, ErrorKind::not_found);
  EXPECT_EQ(gone.error().message, "no process listens on TCP port " + std::to_string(port));
}

}  // namespace
}  // namespace kvprof::sys
