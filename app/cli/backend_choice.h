// --backend auto|cpu|cuda for the app layer. core/ does not know CUDA; the
// CUDA backend (gpu/) is linked and called only when the build has it
// (REMAT_HAVE_CUDA_BACKEND, set by app/CMakeLists.txt).
#pragma once
#include <memory>
#include <ostream>
#include <string>

#include "core/exec/backend.h"

namespace remat::cli {

enum class BackendKind { Auto, Cpu, Cuda };

// Throws InputError for anything but auto, cpu or cuda.
BackendKind parse_backend_kind(const std::string& s);

// auto: CUDA when the build has it and a device answers, otherwise the CPU, and
// one line on `notice` saying why. cuda: throws InputError when it cannot be had.
std::unique_ptr<Backend> make_backend(BackendKind kind, std::ostream& notice);

// True when this build contains the CUDA backend (not whether a device exists).
bool build_has_cuda_backend();

}  // namespace remat::cli
