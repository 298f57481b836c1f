// JSON text that never throws on bad UTF-8 (see json_text.hpp).
#include "kvprof/util/json_text.hpp"

namespace kvprof {

std::string json_text(const nlohmann::json& value, int indent) {
  return value.dump(indent, ' ', /*ensure_ascii=*/false, nlohmann::json::error_handler_t::replace);
}

}  // namespace kvprof
