// libonnx's shape inference is not hardened against malformed graphs: a Conv
// whose kernel has more spatial axes than its input dereferences null in
// convPoolShapeInference (ONNX 1.12, found by fuzzing). It runs in a helper
// process, remat-onnx-infer (onnx_infer_main.cpp), with a time limit, so that
// a crash or hang costs the inferred shapes, not the program.
//
// The helper is started with posix_spawn, not fork(): the window calls this
// from a worker thread, and a fork()ed copy of a multi-threaded process may
// only call async-signal-safe functions (another thread may have held the
// allocator's lock at the fork).
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/io/onnx_importer.h"

extern char** environ;

namespace remat::onnx_import {
namespace {

constexpr int kLimitMs = 60'000;

// $REMAT_ONNX_INFER, else beside the running program (installed, or the CLI in
// the build tree), else where this build put it.
std::string helper_path() {
  if (const char* env = std::getenv("REMAT_ONNX_INFER"); env && *env) return env;
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const auto beside = self.parent_path() / "remat-onnx-infer";
    if (std::filesystem::exists(beside, ec)) return beside.string();
  }
#ifdef REMAT_ONNX_INFER_BUILD_PATH
  return REMAT_ONNX_INFER_BUILD_PATH;
#else
  return {};
#endif
}

// A file in $TMPDIR holding `bytes`, removed when this goes out of scope.
class TempFile {
 public:
  explicit TempFile(const std::string& bytes) {
    const char* dir = std::getenv("TMPDIR");
    path_ = std::string(dir && *dir ? dir : "/tmp") + "/remat-onnx-XXXXXX";
    const int fd = mkstemp(path_.data());
    if (fd < 0) {
      path_.clear();
      return;
    }
    for (std::size_t at = 0; at < bytes.size();) {
      const ssize_t n = write(fd, bytes.data() + at, bytes.size() - at);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        close(fd);
        unlink(path_.c_str());
        path_.clear();
        return;
      }
      at += static_cast<std::size_t>(n);
    }
    close(fd);
  }
  ~TempFile() {
    if (!path_.empty()) unlink(path_.c_str());
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace

bool infer_shapes_isolated(onnx::ModelProto& proto, std::string& why) {
  const std::string helper = helper_path();
  if (helper.empty() || access(helper.c_str(), X_OK) != 0) {
    why = "its helper program remat-onnx-infer was not found" + (helper.empty() ? std::string() : " at " + helper) +
          " (set REMAT_ONNX_INFER)";
    return false;
  }
  const TempFile input(proto.SerializeAsString());
  if (input.path().empty()) {
    why = "cannot write a temporary file for it";
    return false;
  }
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    why = "cannot create a pipe";
    return false;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);  // dup2 clears CLOEXEC on the copy
  std::string arg0 = helper, arg1 = input.path();
  char* argv[] = {arg0.data(), arg1.data(), nullptr};
  pid_t pid = -1;
  const int spawned = posix_spawn(&pid, helper.c_str(), &actions, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  if (spawned != 0) {
    close(fds[0]);
    why = "cannot start " + helper + " (" + std::string(std::strerror(spawned)) + ")";
    return false;
  }

  std::string in;
  char buf[1 << 16];
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kLimitMs);
  bool timed_out = false;
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    const int r = poll(&p, 1, static_cast<int>(left));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      timed_out = r == 0;
      break;
    }
    const ssize_t n = read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    in.append(buf, static_cast<std::size_t>(n));
  }
  close(fds[0]);
  if (timed_out) kill(pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) {
    why = "it took over " + std::to_string(kLimitMs / 1000) + " s";
    return false;
  }
  if (WIFSIGNALED(status)) {
    why = "libonnx crashed on this graph (signal " + std::to_string(WTERMSIG(status)) + ")";
    return false;
  }
  if (in.empty()) {  // e.g. a sanitizer caught the crash and exited
    why = "libonnx ended without a result (exit status " +
          std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) + ")";
    return false;
  }
  if (in[0] != '1') {
    why = in.substr(1);
    return false;
  }
  onnx::ModelProto inferred;
  if (!inferred.ParseFromArray(in.data() + 1, static_cast<int>(in.size() - 1))) {
    why = "its result could not be read";
    return false;
  }
  proto = std::move(inferred);
  return true;
}

}  // namespace remat::onnx_import
