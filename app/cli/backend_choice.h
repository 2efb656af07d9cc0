// --backend auto|cpu|cuda for the app layer, worded for the command line, on
// top of core's choice (core/exec/backend_choice.h: the CUDA module is opened
// only when auto or cuda asks for it).
#pragma once
#include <memory>
#include <ostream>
#include <string>

#include "core/exec/backend_choice.h"

namespace remat::cli {

// Throws InputError for anything but auto, cpu or cuda.
BackendKind parse_backend_kind(const std::string& s);

// auto: CUDA when the module loads and a device answers, otherwise the CPU, and
// one line on `notice` saying why. cuda: throws InputError when it cannot be had.
std::unique_ptr<Backend> make_backend(BackendKind kind, std::ostream& notice);
// The command line's words for core's choice (remat run opens the backend
// through its RunSession): the notice line when auto falls back to the CPU,
// "remat: no GPU: <why>; running on the CPU\n", and the error for --backend
// cuda without a GPU, "--backend cuda: <why>".
std::string no_gpu_notice(const std::string& why);
InputError no_cuda_error(const NoUsableGpu& e);

// True when this build made the CUDA backend module (not whether a device exists).
bool build_has_cuda_backend();

}  // namespace remat::cli
