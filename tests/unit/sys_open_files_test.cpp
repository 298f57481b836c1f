// The open-file limit: kvprof raises its soft limit to the hard one at start (a grid of 300
// requests at once runs under a soft limit of 256), and a grid over the hard limit is refused
// before anything is sent, with the limit and how to raise it.
#include "kvprof/sys/open_files.hpp"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <string>

#include "kvprof/sys/subprocess.hpp"
#include "support/temp_dir.hpp"

namespace kvprof {
namespace {

using namespace std::chrono_literals;

class OpenFiles : public test::TempDirTest {
 protected:
  OpenFiles() : TempDirTest("kvprof_open_files") {}

  // `kvprof profile` of the built-in simulator at 300 requests at once, after `ulimit`.
  sys::CommandResult profile_300(const std::string& ulimit) const {
    const std::string command =
        ulimit + " && exec " + KVPROF_BIN + " profile --sim --output-dir " +
        (m_dir / "results").string() +
        " --baseline-s 0.1 --post-warmup-s 0.1 --min-condition-s 0 --input-lens 16 "
        "--output-lens 2 --concurrencies 300 --prefix-modes low -q";
    sys::CommandOptions o;
    o.timeout = 120s;
    o.env = {{"KVPROF_URL", ""}, {"KVPROF_MODEL", ""}};
    auto r = sys::run_command({"/bin/sh", "-c", command}, o);
    EXPECT_TRUE(r.has_value());
    return r ? *r : sys::CommandResult{};
  }
};

TEST_F(OpenFiles, AGridOverTheHardLimitIsRefusedBeforeAnythingIsSent) {
  const auto r = profile_300("ulimit -n 256");  // soft and hard
  EXPECT_EQ(r.exit_code, 2) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("300 requests at once need about 364 open files, but this "
                               "process may open 256 (the hard limit, `ulimit -Hn`, is 256)"),
            std::string::npos)
      << r.stderr_text;
}

TEST_F(OpenFiles, TheSoftLimitIsRaisedToTheHardOne) {
  rlimit own{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &own), 0);
  if (own.rlim_max < 1024) GTEST_SKIP() << "this machine's hard limit is " << own.rlim_max;
  const auto r = profile_300("ulimit -Sn 256");
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;

  // In-process: the call leaves the soft limit at the hard one.
  const auto limit = sys::raise_open_file_limit();
  EXPECT_EQ(limit.soft, limit.hard);
  EXPECT_TRUE(sys::check_open_files_for(limit.soft - sys::k_reserved_open_files).has_value());
  const auto over = sys::check_open_files_for(limit.soft);
  ASSERT_FALSE(over.has_value());
  EXPECT_EQ(over.error().kind, ErrorKind::usage);
}

}  // namespace
}  // namespace kvprof
