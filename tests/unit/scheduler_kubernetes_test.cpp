// A sweep's jobs as Kubernetes Indexed Jobs: the manifests read back with yaml-cpp hold the Job
// fields with the types the batch/v1 Job schema gives them, one Job per GPU count, each index's
// command shell-quoted as the Slurm script has it; paths off the volume and missing options are
// refused with one line.
#include "kvprof/scheduler/kubernetes.hpp"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <regex>

#include "kvprof/util/shell.hpp"

namespace kvprof::scheduler {
namespace {

JobRequest request(const std::string& fp, unsigned gpus) {
  JobRequest r;
  r.name = "kvprof.grid." + fp;
  r.gpus = gpus;
  r.log_path = "/vol/res ults/sweeps/grid/jobs/" + fp + ".log";
  r.work_dir = "/vol";
  r.command = {"/opt/kvprof/bin/kvprof", "sweep",  "--config", "/vol/grid.yaml", "--output-dir",
               "/vol/res ults",          "--name", "grid",     "--job",          fp};
  r.shared_paths = {"/vol/grid.yaml", "/vol/res ults"};
  return r;
}

KubernetesOptions options() {
  return {"grid", "ghcr.io/example/kvprof:1", "results-claim", "/vol", "profiling"};
}

TEST(Kubernetes, IndexedJobsPerGpuCountWithTheSchemasFieldsAndTypes) {
  const std::vector<JobRequest> requests = {request("aaaa", 1), request("bbbb", 2),
                                            request("cccc", 1)};
  const auto text = kubernetes_manifests(requests, options());
  ASSERT_TRUE(text.has_value()) << text.error().message;
  const auto docs = YAML::LoadAll(*text);
  ASSERT_EQ(docs.size(), 2U) << *text;
  const std::regex dns("[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?");
  std::map<unsigned, size_t> completions;  // GPUs -> indices
  for (const auto& d : docs) {
    EXPECT_EQ(d["apiVersion"].as<std::string>(), "batch/v1");
    EXPECT_EQ(d["kind"].as<std::string>(), "Job");
    EXPECT_TRUE(std::regex_match(d["metadata"]["name"].as<std::string>(), dns));
    EXPECT_EQ(d["metadata"]["namespace"].as<std::string>(), "profiling");
    EXPECT_TRUE(d["metadata"]["labels"].IsMap());
    const auto spec = d["spec"];
    EXPECT_EQ(spec["completionMode"].as<std::string>(), "Indexed");
    const int n = spec["completions"].as<int>();
    EXPECT_EQ(spec["parallelism"].as<int>(), n);
    EXPECT_EQ(spec["backoffLimit"].as<int>(), 0);
    const auto pod = spec["template"]["spec"];
    EXPECT_EQ(pod["restartPolicy"].as<std::string>(), "Never");
    ASSERT_TRUE(pod["containers"].IsSequence());
    ASSERT_EQ(pod["containers"].size(), 1U);
    const auto c = pod["containers"][0];
    EXPECT_TRUE(std::regex_match(c["name"].as<std::string>(), dns));
    EXPECT_EQ(c["image"].as<std::string>(), "ghcr.io/example/kvprof:1");
    ASSERT_TRUE(c["command"].IsSequence());
    ASSERT_TRUE(c["args"].IsSequence());
    const auto gpus = c["resources"]["limits"]["nvidia.com/gpu"].as<unsigned>();
    completions[gpus] = static_cast<size_t>(n);
    EXPECT_EQ(c["volumeMounts"][0]["mountPath"].as<std::string>(), "/vol");
    EXPECT_EQ(c["volumeMounts"][0]["name"].as<std::string>(),
              pod["volumes"][0]["name"].as<std::string>());
    EXPECT_EQ(pod["volumes"][0]["persistentVolumeClaim"]["claimName"].as<std::string>(),
              "results-claim");
    // Each index runs one configuration's command, its words quoted as the Slurm script's are.
    const auto script = c["args"][0].as<std::string>();
    for (const auto& r : requests) {
      if (r.gpus != gpus) continue;
      std::string line = "exec";
      for (const auto& w : r.command)
        line += " " + shell_quote(w);
      EXPECT_NE(script.find(line + "\n"), std::string::npos) << script;
    }
  }
  EXPECT_EQ(completions, (std::map<unsigned, size_t>{{1, 2}, {2, 1}}));
}

TEST(Kubernetes, PathsOffTheVolumeAndMissingOptionsAreRefused) {
  auto off = request("aaaa", 1);
  off.shared_paths = {"/home/me/grid.yaml"};
  auto r = kubernetes_manifests({off}, options());
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().kind, ErrorKind::usage);
  EXPECT_NE(r.error().message.find("/home/me/grid.yaml is not under --k8s-mount-path /vol"),
            std::string::npos)
      << r.error().message;
  auto no_image = options();
  no_image.image.clear();
  r = kubernetes_manifests({request("aaaa", 1)}, no_image);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message.find("--k8s-image"), std::string::npos);
  EXPECT_EQ(dns_label("Grid_Sweep.v2--"), "grid-sweep-v2");
  EXPECT_EQ(dns_label(std::string(100, 'a')).size(), 63U);
}

}  // namespace
}  // namespace kvprof::scheduler
