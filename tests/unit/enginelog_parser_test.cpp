// Tests of the engine log reader's bounds and of hostile input: huge numbers, nan, truncated
// lines, binary garbage, a 10 MB line, a size cap; and of printed-size precision.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "kvprof/enginelog/parser.hpp"
#include "kvprof/enginelog/scan.hpp"
#include "kvprof/engines/registry.hpp"
#include "kvprof/report/text/engine_log_report.hpp"
#include "kvprof/util/units.hpp"

namespace kvprof::enginelog {
namespace {

TEST(EngineLogScan, PrintedSizeBytesAndTolerance) {
  Cursor c("  110.53 MiB (16.00 BPW)");
  const auto s = c.read_size();
  ASSERT_TRUE(s);
  EXPECT_EQ(s->bytes, (11053 * k_mib + 50) / 100);
  EXPECT_EQ(s->text, "110.53 MiB");
  EXPECT_EQ(s->tolerance_bytes, 5243U);
  Cursor g("4.9 GiB");
  const auto gs = g.read_size();
  ASSERT_TRUE(gs);
  EXPECT_EQ(gs->tolerance_bytes, (1ULL << 30) / 20 + 1);  // +-0.05 GiB, rounded up
  Cursor gb("1.5 GB");
  EXPECT_EQ(gb.read_size(GbMeans::gb)->bytes, 1'500'000'000U);
  Cursor gib("1.5 GB");
  EXPECT_EQ(gib.read_size(GbMeans::gib)->bytes, 3ULL << 29);
}

TEST(EngineLogScan, RejectsNanInfNegativeHugeAndUnitless) {
  for (const char* text :
       {"nan MiB", "inf MiB", "-5.00 MiB", "1e30 MiB", "12.5", "12. MiB",
        "99999999999999999999.99 MiB", "1.1234567 MiB", "17592186044416 TiB", "5 parsecs", ""}) {
    Cursor c(text);
    EXPECT_FALSE(c.read_size()) << text;
    EXPECT_EQ(c.pos(), 0U) << text;
  }
  Cursor max("17592186044415.99 MiB");  // just under 2^64 bytes
  EXPECT_TRUE(max.read_size());
  Cursor big("18446744073709551616");
  EXPECT_FALSE(big.read_uint());
  Cursor commas("1,210,304 tokens");
  EXPECT_EQ(commas.read_uint(true), 1210304U);
}

TEST(EngineLogParser, HostileLinesAreIgnoredNeverFatal) {
  const std::string log =
      "load_tensors:   CPU_Mapped model buffer size =   nan MiB\n"
      "llama_kv_cache:      CUDA0 KV buffer size = 999999999999999999999999 MiB\n"
      "llama_kv_cache: size =   64.00 MiB (  8192 cells,   8 layers,  4 seqs), K (f16):   32.0\n"
      "llama_context: n_ctx         = -1\n"
      "llama_context: n_ctx         = 99999999999999999999999\n"
      "llama_memory_breakdown_print: | memory breakdown [MiB] | total |\n"
      "llama_memory_breakdown_print: |   - CUDA0 (x | 1 = 2 + (3 = 4 + 5 + 6) + |\n"
      "sched_reserve:      CUDA0 compute buffer size =   1366.07 MiB\n";
  const auto r = parse_engine_log(log, engines::log_parse_options());
  EXPECT_EQ(r.n_lines, 8U);
  ASSERT_EQ(r.figures.size(), 1U);  // only the last, well-formed line
  EXPECT_EQ(r.figures[0].source.line_no, 8U);
  EXPECT_FALSE(r.settings.n_ctx);
  EXPECT_FALSE(r.settings.kv_cells);
  EXPECT_TRUE(r.breakdown.empty());
}

TEST(EngineLogParser, BinaryGarbageAndNulBytes) {
  std::string log;
  for (int i = 0; i < 4096; ++i)
    log.push_back(static_cast<char>((i * 131 + 7) % 256));
  log += "\nllama_kv_cache:      CUDA0 KV buffer size =   \xff\xfe MiB\n";
  log += std::string("sched_reserve:  CUDA\0_Host compute buffer size =    11.54 MiB\n", 61);
  const auto r = parse_engine_log(log, engines::log_parse_options());
  ASSERT_EQ(r.figures.size(), 1U);
  // The JSON of a report with binary bytes in its lines is valid UTF-8.
  const auto j = report::text::engine_log_json(r);
  EXPECT_NO_THROW((void)j.dump());
  EXPECT_NO_THROW((void)report::text::engine_log_text(r));
}

TEST(EngineLogParser, TenMegabyteLineIsSkippedAndCounted) {
  std::string log = "llama_context: n_ctx         = 8192\n";
  log += "load_tensors:   CUDA0 model buffer size = " + std::string(10'000'000, '9') + " MiB\n";
  log += "llama_kv_cache:      CUDA0 KV buffer size =   182.75 MiB\n";
  EngineLogParser p(engines::log_parse_options());
  for (size_t i = 0; i < log.size(); i += 1 << 16)
    p.feed(std::string_view(log).substr(i, 1 << 16));
  const auto r = p.finish();
  EXPECT_EQ(r.n_lines, 3U);
  EXPECT_EQ(r.n_skipped_long_lines, 1U);
  ASSERT_EQ(r.figures.size(), 1U);
  EXPECT_EQ(r.figures[0].source.line_no, 3U);
  EXPECT_EQ(r.settings.n_ctx->value, 8192U);
}

TEST(EngineLogParser, TotalBoundStopsReading) {
  auto options = engines::log_parse_options();
  options.max_total_bytes = 100;
  std::string log = "llama_kv_cache:      CUDA0 KV buffer size =   182.75 MiB\n";  // 57 bytes
  log += log;
  const auto r = parse_engine_log(log, options);
  EXPECT_TRUE(r.truncated);
  EXPECT_EQ(r.figures.size(), 1U);  // the cut second line no longer names a size
}

TEST(EngineLogParser, ForcedEngineReadsOnlyItsLines) {
  const std::string log =
      "llama_kv_cache:      CUDA0 KV buffer size =   182.75 MiB\n"
      "(EngineCore pid=1) INFO [gpu_worker.py:436] Available KV cache memory: 61.66 GiB\n";
  auto options = engines::log_parse_options(engines::Engine::vllm);
  const auto r = parse_engine_log(log, options);
  EXPECT_EQ(r.engine, engines::Engine::vllm);
  ASSERT_EQ(r.figures.size(), 1U);
  EXPECT_EQ(r.figures[0].source.line_no, 2U);
  const auto detected = parse_engine_log(log, engines::log_parse_options());
  EXPECT_EQ(detected.engine, engines::Engine::llamacpp);
  EXPECT_EQ(detected.figures.size(), 1U);
}

TEST(EngineLogParser, FileErrors) {
  const auto missing = parse_engine_log_file("/no/such/file.log", engines::log_parse_options());
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().kind, ErrorKind::not_found);
  const auto dir =
      parse_engine_log_file(std::filesystem::temp_directory_path(), engines::log_parse_options());
  ASSERT_FALSE(dir);
  EXPECT_EQ(dir.error().kind, ErrorKind::input);
}

TEST(EngineLogParser, UnterminatedLastLineAndCrlf) {
  const auto r =
      parse_engine_log("llama_context: n_ctx         = 8192\r\nllama_context: n_batch = 512",
                       engines::log_parse_options());
  EXPECT_EQ(r.n_lines, 2U);
  EXPECT_EQ(r.settings.n_ctx->value, 8192U);
  EXPECT_EQ(r.settings.n_ctx->source.text, "llama_context: n_ctx         = 8192");
  EXPECT_EQ(r.settings.n_batch->value, 512U);
}

}  // namespace
}  // namespace kvprof::enginelog
