// --backend auto|cpu|cuda for the app layer. core/ does not know CUDA; the
// CUDA backend is a module (libremat_cuda.so) opened at run time only when
// auto or cuda asks for it (core/exec/cuda_module.h), so commands that never
// run on a GPU do not pay for loading cuBLAS.
#pragma once
#include <memory>
#include <ostream>
#include <string>

#include "core/exec/backend.h"

namespace remat::cli {

enum class BackendKind { Auto, Cpu, Cuda };

// Throws InputError for anything but auto, cpu or cuda.
BackendKind parse_backend_kind(const std::string& s);

// auto: CUDA when the module loads and a device answers, otherwise the CPU, and
// one line on `notice` saying why. cuda: throws InputError when it cannot be had.
std::unique_ptr<Backend> make_backend(BackendKind kind, std::ostream& notice);

// True when this build made the CUDA backend module (not whether a device exists).
bool build_has_cuda_backend();

}  // namespace remat::cli
