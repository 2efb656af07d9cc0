// The CUDA backend is a module opened only when a run asks for it
// (core/exec/cuda_module.h). Where it is missing, unloadable or answers no
// device, auto runs on the CPU with one notice and cuda is one error; both
// name the reason. $REMAT_CUDA_MODULE points the loader at stand-ins.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_runner.h"

namespace {

class ModulePath {
 public:
  explicit ModulePath(const std::string& path) { setenv("REMAT_CUDA_MODULE", path.c_str(), 1); }
  ~ModulePath() { unsetenv("REMAT_CUDA_MODULE"); }
};

const char* kRun = "run --model mlp:2:16:4 --strategy store-all --repeat 1 --json";

std::string cpu_notice(const std::string& why) { return "remat: no GPU: " + why + "; running on the CPU\n"; }

}  // namespace

TEST(CliBackendModule, MissingModuleAutoRunsOnTheCpuNamingWhereItLooked) {
  const ModulePath env("/nonexistent/libremat_cuda.so");
  const CliResult r = run_cli(std::string(kRun) + " --backend auto");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["backend"], "cpu");
  EXPECT_EQ(r.err, cpu_notice("the CUDA backend module libremat_cuda.so was not found (looked for "
                              "/nonexistent/libremat_cuda.so)"));
}

TEST(CliBackendModule, MissingModuleExplicitCudaIsOneError) {
  const ModulePath env("/nonexistent/libremat_cuda.so");
  const CliResult r = run_cli(std::string(kRun) + " --backend cuda");
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "remat: error: --backend cuda: the CUDA backend module libremat_cuda.so was not found (looked for "
                   "/nonexistent/libremat_cuda.so)\n");
}

TEST(CliBackendModule, TheEntryPointIsCalledWithThisBuildsAbi) {
  const ModulePath env(REMAT_FAKE_CUDA_MODULE);
  const CliResult r = run_cli(std::string(kRun) + " --backend auto");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, cpu_notice("fake module: same build"));
  const CliResult cuda = run_cli(std::string(kRun) + " --backend cuda");
  EXPECT_EQ(cuda.code, 2);
  EXPECT_EQ(cuda.err, "remat: error: --backend cuda: fake module: same build\n");
}

TEST(CliBackendModule, ASharedObjectWithoutTheEntryPoint) {
  const ModulePath env(REMAT_FAKE_MODULE_WITHOUT_ENTRY);
  const CliResult r = run_cli(std::string(kRun) + " --backend auto");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, cpu_notice(std::string("the CUDA backend module ") + REMAT_FAKE_MODULE_WITHOUT_ENTRY +
                              " has no entry point remat_cuda_module_create"));
}

TEST(CliBackendModule, AFileThatIsNoSharedObject) {
  const std::string path = temp_path("libremat_cuda.so");
  std::ofstream(path) << "not an ELF file\n";
  const ModulePath env(path);
  const CliResult r = run_cli(std::string(kRun) + " --backend auto");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err.rfind("remat: no GPU: the CUDA backend module " + path + " could not be loaded: ", 0), 0u) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

TEST(CliBackendModule, CpuNeverLooksForTheModule) {
  const ModulePath env("/nonexistent/libremat_cuda.so");
  const CliResult r = run_cli(std::string(kRun) + " --backend cpu");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "");
}

#ifdef REMAT_CUDA_MODULE_BUILT
// The module this build made is found in the build tree and loads; without a
// device it says so (not that the module is missing).
TEST(CliBackendModule, TheBuiltModuleIsFound) {
  const CliResult r = run_cli(std::string(kRun) + " --backend auto");
  ASSERT_EQ(r.code, 0) << r.err;
  if (nlohmann::json::parse(r.out)["backend"] != "cpu") {
    EXPECT_EQ(r.err, "");
    return;
  }
  EXPECT_EQ(r.err.rfind("remat: no GPU: ", 0), 0u) << r.err;
  EXPECT_EQ(r.err.find("was not found"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("could not be loaded"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("another version"), std::string::npos) << r.err;
}
#endif
