// libFuzzer target for a container runtime's `container inspect` answer (docker's or podman's):
// whatever the bytes, reading them is an error value or a container kvprof can reach, never a
// crash.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "kvprof/run/container.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  if (auto info = kvprof::run::parse_container_inspect(text, "fuzz")) (void)info->endpoint();
  return 0;
}
