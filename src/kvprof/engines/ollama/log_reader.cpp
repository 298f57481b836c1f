// Ollama's server log: its own lines, in Go's slog text format
//   time=... level=INFO source=memory.go:309 msg="offload to cuda" layers.requested=-1 ...
//   time=... level=INFO source=server.go:391 msg="starting llama server" cmd="... --ctx-size 8192"
//   time=... level=INFO source=routes.go:1259 msg="Listening on [::]:11434 (version 0.5.4)"
// and, once one of them has named the log Ollama's, the lines of the llama.cpp runner it starts,
// read by llama.cpp's own reader.
#include <cctype>
#include <string>

#include "kvprof/enginelog/line_reader.hpp"
#include "kvprof/enginelog/scan.hpp"
#include "kvprof/engines/llamacpp/llamacpp.hpp"
#include "kvprof/engines/ollama/ollama.hpp"

namespace kvprof::engines {

using namespace kvprof::enginelog;  // NOLINT: the line splitter and scanner

namespace {

// A line of Ollama's own logger: "level=INFO source=server.go:391 msg=...".
bool is_ollama_marker(std::string_view text) {
  Cursor c(text);
  if (!c.seek_past("level=") || !c.seek_past(" source=")) return false;
  const auto file = c.read_token(":");
  return file.ends_with(".go") && contains(text, " msg=");
}

// "(version 0.5.4-0-g2ddc32d-dirty)" -> "0.5.4".
bool parse_ollama_version(const LineInput& in, EngineLogReport& report) {
  Cursor c(in.text);
  if (!c.seek_past("(version ")) return false;
  const auto v = c.read_token("-)");
  if (v.empty() || v.size() > 32 || !std::isdigit(static_cast<unsigned char>(v.front())))
    return false;
  return keep_first(report.version, std::string(v), in);
}

bool parse_ollama_line(const LineInput& in, EngineLogReport& report) {
  if (!is_ollama_marker(in.text)) return false;
  if (contains(in.text, "Listening on ")) return parse_ollama_version(in, report);
  // Its estimate and the runner it starts: the log is Ollama's, the figures are llama.cpp's.
  return contains(in.text, "msg=\"offload to ") || contains(in.text, "msg=offload ") ||
         contains(in.text, "msg=\"starting llama server\"") ||
         contains(in.text, "msg=\"starting runner\"") ||
         contains(in.text, "msg=\"starting llama-server\"");
}

}  // namespace

LineReader ollama_log_reader() {
  LineReader r;
  r.engine = Engine::ollama;
  r.is_marker = &is_ollama_marker;
  r.read = [llamacpp = llamacpp_log_reader()](const LineInput& in,
                                              EngineLogReport& report) mutable {
    if (parse_ollama_line(in, report)) return true;
    // llama.cpp's lines only once the log is known to be Ollama's (a plain llama.cpp log stays
    // llama.cpp's).
    return report.engine == Engine::ollama && llamacpp.read(in, report);
  };
  return r;
}

}  // namespace kvprof::engines
