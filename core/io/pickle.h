// Python's pickle format for plain data (dicts, lists, tuples, strings,
// integers, floats, booleans, None), as JSON values: what PyTorch's memory
// snapshots (torch.cuda.memory._dump_snapshot) are made of. No Python objects:
// a pickle that names a class is refused, so reading one runs no code.
#pragma once
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace remat {

// Protocol 4, written with only the opcodes the unpickler of PyTorch's memory
// viewer (torch/utils/viz/MemoryViz.js) knows: EMPTY_DICT/LIST + MARK +
// SETITEMS/APPENDS, SHORT_BINUNICODE/BINUNICODE, BININT1/BININT2/BININT/LONG1,
// BINFLOAT, NONE, NEWTRUE/NEWFALSE. Python's pickle.load reads it as dicts and lists.
std::string to_pickle(const nlohmann::json& value);

// Protocols 0 to 5 as Python writes plain data: tuples and sets become
// arrays, dict keys that are integers become their decimal text, bytes are
// refused. Shared references (memo) are copied, up to kMaxPickleValues values
// in all. Throws InputError naming `origin` and the byte offset.
nlohmann::json from_pickle(std::string_view bytes, const std::string& origin);

inline constexpr std::size_t kMaxPickleValues = 50'000'000;

}  // namespace remat
