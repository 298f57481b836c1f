// kvprof: plan and measure the GPU memory of LLM serving deployments. See docs/architecture.md.
#include "kvprof/cli/cli.hpp"

int main(int argc, char** argv) { return kvprof::cli::run(argc, argv); }
