// A server running in a container (the predecessors' `container_name`): its runtime (docker or
// podman, whichever is on PATH) asked for the container's facts with `container inspect`, and
// from them the URL kvprof measures it at — the host port published for the engine's port — and
// the engine, its release (the image tag) and the model its command line serves.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "kvprof/util/error.hpp"

namespace kvprof::run {

// Largest `container inspect` answer kvprof reads.
inline constexpr size_t k_max_container_inspect_bytes = 4 << 20;

struct ContainerInfo {
  std::string name;            // as the runtime names it, without the leading '/'
  std::string id;              // full id
  std::string status;          // "running", "exited", ...
  std::string image;           // "vllm/vllm-openai:v0.6.3"
  std::string engine;          // "vllm", "sglang", "tgi", "llamacpp", "trtllm"; empty: unknown
  std::string engine_version;  // from the image tag ("0.6.3", "b4753"); empty: unknown
  std::string model;           // what its command line serves; empty: not given there
  uint16_t engine_port = 0;    // the port the engine listens on inside the container
  std::string host;            // where that port is published on this machine
  uint16_t host_port = 0;
  bool host_network = false;  // --network host: the engine's own port, on this machine
  [[nodiscard]] std::string endpoint() const;  // "http://127.0.0.1:8000/v1"
};

// Reads the answer of `docker container inspect NAME` (or podman's: a JSON array of one object)
// for container `name`: an input error when it is not such an answer, or the container is not
// running, or no port of it can be reached from this machine.
Expected<ContainerInfo> parse_container_inspect(std::string_view json_text, std::string_view name);

// The container runtime kvprof uses: $KVPROF_CONTAINER_RUNTIME when set, else docker, else
// podman, the first on PATH; not_found when there is none.
Expected<std::string> container_runtime();

// Asks the runtime for container `name` (checked first to be a container name or id) and reads
// its answer; the runtime's own one-line reason when it cannot answer (no daemon, no such
// container).
Expected<ContainerInfo> inspect_container(std::string_view name);

}  // namespace kvprof::run
