// The op kinds a backend can execute: the RUN lines of the one list of kinds
// (core/model/op_kinds.h), as X(Kind, entry, rule, min_inputs, max_inputs).
// Every execution table is generated from it:
// - core/exec/op_exec.cpp: each kind's parameter tensors and backward scratch
//   (params_<entry>, scratch_<entry>);
// - each backend's kernel table (core/exec/cpu_ops.cpp,
//   gpu/backend/cuda_ops.cpp): fwd_<entry> and bwd_<entry>.
// Making a kind executable is turning its SIM line into a RUN line, and the
// compiler then asks for its entry points in every backend. A table's row
// macro takes (Kind, entry, ...) and ignores the rest.
#pragma once

#include "core/model/op_kinds.h"

#define REMAT_EXEC_KINDS(X) REMAT_OP_KINDS(REMAT_OP_KIND_SKIP, X)
