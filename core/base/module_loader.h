// Parts of remat that pull in large libraries (the CUDA backend: cuBLAS; the
// pictures of `remat export`: Qt) are modules opened at run time, only by the
// commands that need them: linking them made every command pay their start-up.
// This finds a module and its one C entry point; what the entry point means is
// the caller's (core/exec/cuda_module.h, app/cli/render_module.h).
#pragma once
#include <string>
#include <vector>

namespace remat {

struct ModuleSpec {
  const char* file;         // "libremat_cuda.so"
  const char* entry;        // the exported symbol
  const char* env;          // a variable that, when set, is the only path tried
  const char* build_path;   // the module in the build tree ("" when not built)
  const char* install_dir;  // its folder relative to the installed executable's ("../lib/remat")
  const char* what;         // "the CUDA backend module", for messages
};

// Where `spec` is looked for, in order: $env (alone, when set), next to the
// running executable, the install layout, the build tree.
std::vector<std::string> module_candidates(const ModuleSpec& spec);

// dlopen()s the first candidate that exists (never closed: what it makes must
// not outlive its code) and returns its entry point, or nullptr with one line
// in *why_not: not found (with where it looked), not loadable (dlerror), no
// entry point.
void* open_module(const ModuleSpec& spec, std::string* why_not);

}  // namespace remat
