// Graphviz (DOT) picture of a model's DAG, written with Boost.Graph's
// write_graphviz: one node per op labelled "name\nKind shape", edges from
// producers to consumers; simulate-only ops are dashed.
#pragma once
#include <ostream>
#include <string>

#include "core/model/model.h"

namespace remat {

void write_model_dot(std::ostream& out, const Model& model);
// Atomically (atomic_file.h); throws InputError naming the path.
void save_model_dot(const Model& model, const std::string& path);

}  // namespace remat
