// `kvprof make-gguf`: writes a GGUF file with random ("dummy") weights for any model kvprof can
// describe, which llama.cpp loads and runs with the real model's memory and speed.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "kvprof/cli/commands.hpp"
#include "kvprof/model/dummy_gguf.hpp"
#include "kvprof/model/dummy_vocab.hpp"
#include "kvprof/model/resolve.hpp"
#include "kvprof/util/json_text.hpp"
#include "kvprof/util/units.hpp"

namespace kvprof::cli {
namespace {

constexpr uint64_t k_progress_min_bytes = 256ULL << 20;  // smaller files print no progress

// A "written / total, ETA" line on stderr, redrawn at most a few times a second.
class ProgressLine {
 public:
  ProgressLine() : m_start(std::chrono::steady_clock::now()) {}
  void update(uint64_t written, uint64_t total) {
    const auto now = std::chrono::steady_clock::now();
    if (written < total && now - m_last < std::chrono::milliseconds(200)) return;
    m_last = now;
    const double secs = std::chrono::duration<double>(now - m_start).count();
    const double rate = secs > 0 ? static_cast<double>(written) / secs : 0;
    const double eta = rate > 0 ? static_cast<double>(total - written) / rate : 0;
    std::fprintf(stderr, "\r  %s / %s  %3.0f%%  ETA %4.0f s ", format_bytes(written).c_str(),
                 format_bytes(total).c_str(),
                 total > 0 ? 100.0 * static_cast<double>(written) / static_cast<double>(total) : 0,
                 eta);
    if (written >= total) std::fputc('\n', stderr);
    std::fflush(stderr);
  }

 private:
  std::chrono::steady_clock::time_point m_start;
  std::chrono::steady_clock::time_point m_last{};
};

}  // namespace

void register_make_gguf_command(CLI::App& app) {
  struct Options {
    std::string model;
    std::string output;
    std::string type = "f16";
    uint64_t seed = 0;
    bool json = false;
    bool no_chat_template = false;
  };
  auto o = std::make_shared<Options>();
  auto* cmd = app.add_subcommand(
      "make-gguf",
      "Write a GGUF with random (dummy) weights that llama.cpp loads: the real model's tensors, "
      "memory and speed, nonsense text (like vLLM's --load-format dummy)");
  cmd->footer(fmt::format(
      "Architectures: {}.\n"
      "Norm weights are 1.0, other floats uniform in +-0.02, quantized blocks random with small\n"
      "scales; norms and MoE routers stay F32, and a matrix whose rows are not whole blocks of\n"
      "--type gets Q8_0 (or F16). The tokenizer is synthetic (SentencePiece-style): the text\n"
      "\"w0 w1 w2 ...\" (words wK, K < vocab_size - {}) is one token per word, plus BOS.",
      fmt::join(model::dummy_gguf_supported(), "; "), model::k_dummy_first_word_id));
  cmd->add_option("-m,--model", o->model, "Catalog id or alias, config.json, or model folder")
      ->envname("KVPROF_MODEL")
      ->required();
  cmd->add_option("-o,--output", o->output, "GGUF file to write")->type_name("FILE")->required();
  cmd->add_option("--type", o->type,
                  "Type of the weight matrices: f16 bf16 f32 q8_0 q4_0 q4_k, or a llama-quantize "
                  "mix (" +
                      model::gguf_mix_names() +
                      ") giving each tensor the type llama-quantize would")
      ->capture_default_str();
  cmd->add_option("--seed", o->seed, "Seed of the random weights (same seed, same file)")
      ->capture_default_str();
  cmd->add_flag("--no-chat-template", o->no_chat_template,
                "Write no tokenizer.chat_template (by default a ChatML one, which `kvprof serve` "
                "applies to chat requests)");
  cmd->add_flag("--json", o->json, "Print a JSON summary (path, arch, tensors, bytes)");
  cmd->callback([o] {
    const auto mix = model::find_gguf_mix(o->type);
    model::DummyGgufOptions options{
        mix ? mix->default_type : value_or_fatal(model::parse_dummy_type(o->type)), o->seed};
    if (o->no_chat_template) options.chat_template.clear();
    const auto spec = value_or_fatal(model::load_model(o->model));
    const auto plan = value_or_fatal(model::plan_dummy_gguf(spec, options, mix));

    const bool show_progress =
        ::isatty(STDERR_FILENO) != 0 && plan.writer.data_bytes() >= k_progress_min_bytes;
    ProgressLine line;
    model::GgufProgressFn progress;
    if (show_progress) progress = [&line](uint64_t w, uint64_t t) { line.update(w, t); };
    const auto start = std::chrono::steady_clock::now();
    const auto summary =
        value_or_fatal(model::write_dummy_gguf(plan, options, o->output, progress));
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

    if (o->json) {
      const nlohmann::json json = {{"schema_version", 1},
                                   {"path", o->output},
                                   {"model", spec.id},
                                   {"arch", summary.arch},
                                   {"type", o->type},
                                   {"seed", o->seed},
                                   {"tensors", summary.n_tensors},
                                   {"tensor_bytes", summary.tensor_bytes},
                                   {"file_bytes", summary.file_bytes},
                                   {"vocab_size", spec.vocab_size},
                                   {"seconds", secs}};
      std::fputs((json_text(json, 2) + "\n").c_str(), stdout);
      return;
    }
    std::fputs(fmt::format("wrote {}: {} ({}), {} tensors, {} of weights, {} file, {:.1f} s\n",
                           o->output, spec.id, summary.arch, summary.n_tensors,
                           format_bytes(summary.tensor_bytes, 2, true),
                           format_bytes(summary.file_bytes, 2, true), secs)
                   .c_str(),
               stdout);
  });
}

}  // namespace kvprof::cli
