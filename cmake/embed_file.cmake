# Writes OUTPUT: a C++ file defining kvprof::embedded::SYMBOL() from the bytes of INPUT (any
# bytes: UTF-8 text included).
file(READ ${INPUT} hex HEX)
string(LENGTH "${hex}" hex_len)
math(EXPR n_bytes "${hex_len} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
file(WRITE ${OUTPUT}
  "// Generated from ${INPUT}; do not edit.\n#include <string_view>\n"
  "namespace kvprof::embedded {\nstatic const unsigned char k_${SYMBOL}[] = {${bytes} 0};\n"
  "std::string_view ${SYMBOL}() {\n"
  "  return {reinterpret_cast<const char*>(k_${SYMBOL}), ${n_bytes}};\n}\n}\n")
