# Compiles a data file into the binary as a std::string_view, so the catalogs are facts in
# data files (data/*.json) and the binary still runs from anywhere.
function(kvprof_embed out_var input symbol)
  set(out ${CMAKE_CURRENT_BINARY_DIR}/embedded_${symbol}.cpp)
  add_custom_command(
    OUTPUT ${out}
    COMMAND ${CMAKE_COMMAND} -DINPUT=${input} -DOUTPUT=${out} -DSYMBOL=${symbol}
            -P ${PROJECT_SOURCE_DIR}/cmake/embed_file.cmake
    DEPENDS ${input} ${PROJECT_SOURCE_DIR}/cmake/embed_file.cmake
    COMMENT "Embedding ${input}")
  set(${out_var} ${out} PARENT_SCOPE)
endfunction()
