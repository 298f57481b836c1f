// The built-in default engine of `kvprof profile` (see profile_default.hpp).
#include "kvprof/cli/profile_default.hpp"

#include <fmt/format.h>

#include <system_error>

#include "kvprof/llama/library.hpp"
#include "kvprof/model/dummy_gguf.hpp"
#include "kvprof/model/resolve.hpp"
#include "kvprof/util/shell.hpp"
#include "kvprof/util/strings.hpp"
#include "kvprof/util/units.hpp"

namespace kvprof::cli {

namespace fs = std::filesystem;

namespace {

// "qwen2.5-0.5b-instruct" of "Qwen/Qwen2.5-0.5B-Instruct": a file name.
std::string file_stem(std::string_view model) {
  if (const size_t slash = model.rfind('/'); slash != std::string_view::npos)
    model = model.substr(slash + 1);
  std::string out;
  for (const char c : to_lower(model))
    out += std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' ? c : '-';
  return out.substr(0, 80);
}

}  // namespace

Expected<DefaultEngine> default_engine(const std::string& model, const fs::path& output_dir,
                                       const std::string& llama_lib) {
  DefaultEngine out;
  llama::LlamaLibOptions lib;
  lib.path = llama_lib;
  auto found = llama::find_llama_library(lib);
  if (!found) return std::unexpected(found.error());
  out.library = found->parent_path().string();
  out.model_id = model.empty() ? std::string(k_default_engine_model) : model;
  std::error_code ec;
  if (to_lower(out.model_id).ends_with(".gguf")) {
    if (!fs::is_regular_file(out.model_id, ec)) {
      return fail(ErrorKind::usage, fmt::format("--model {}: no such file", out.model_id));
    }
    out.gguf = out.model_id;
  } else {
    auto spec = model::load_model(out.model_id);
    if (!spec) return std::unexpected(spec.error());
    model::DummyGgufOptions options{*model::parse_dummy_type("q8_0"), 0};
    auto plan = model::plan_dummy_gguf(*spec, options);
    if (!plan) return std::unexpected(plan.error());
    if (plan->writer.data_bytes() > k_default_engine_max_bytes) {
      return fail(ErrorKind::usage,
                  fmt::format("{} is {} in Q8_0: too big to serve on this machine as the "
                              "built-in default; profile it with --launch or --endpoint, or "
                              "the simulator with --sim",
                              out.model_id, format_bytes(plan->writer.data_bytes(), 1, true)));
    }
    out.gguf = output_dir / ".models" / (file_stem(out.model_id) + "-dummy-q8_0.gguf");
    if (!fs::is_regular_file(out.gguf, ec)) {
      fs::create_directories(out.gguf.parent_path(), ec);
      if (ec) {
        return fail(ErrorKind::io,
                    fmt::format("{}: {}", out.gguf.parent_path().string(), ec.message()));
      }
      auto written = model::write_dummy_gguf(*plan, options, out.gguf);
      if (!written) return std::unexpected(written.error());
      out.made_now = true;
    }
  }
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  out.command = fmt::format(
      "{} serve -m {} --alias {} --llama-lib {} -c {} -np {} --metrics --host {{host}} "
      "--port {{port}}",
      shell_quote(ec ? std::string("kvprof") : self.string()), shell_quote(out.gguf.string()),
      shell_quote(out.model_id), shell_quote(out.library), k_default_engine_ctx,
      k_default_engine_slots);
  return out;
}

}  // namespace kvprof::cli
