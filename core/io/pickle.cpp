#include "core/io/pickle.h"

#include <bit>
#include <cstring>
#include <memory>
#include <vector>

#include "core/base/errors.h"

namespace remat {
namespace {

// Opcodes (Lib/pickle.py names).
enum : uint8_t {
  MARK = '(', STOP = '.', POP = '0', POP_MARK = '1', DUP = '2', FLOAT = 'F', INT = 'I', BININT = 'J',
  BININT1 = 'K', LONG = 'L', BININT2 = 'M', NONE = 'N', STRING = 'S', BINSTRING = 'T', SHORT_BINSTRING = 'U',
  UNICODE = 'V', BINUNICODE = 'X', APPEND = 'a', DICT = 'd', EMPTY_DICT = '}', APPENDS = 'e', GET = 'g',
  BINGET = 'h', LONG_BINGET = 'j', LIST = 'l', EMPTY_LIST = ']', PUT = 'p', BINPUT = 'q', LONG_BINPUT = 'r',
  SETITEM = 's', TUPLE = 't', EMPTY_TUPLE = ')', SETITEMS = 'u', BINFLOAT = 'G',
  PROTO = 0x80, TUPLE1 = 0x85, TUPLE2 = 0x86, TUPLE3 = 0x87, NEWTRUE = 0x88, NEWFALSE = 0x89, LONG1 = 0x8a,
  LONG4 = 0x8b, SHORT_BINUNICODE = 0x8c, BINUNICODE8 = 0x8d, EMPTY_SET = 0x8f, ADDITEMS = 0x90,
  FROZENSET = 0x91, MEMOIZE = 0x94, FRAME = 0x95,
};

// ---- writing ------------------------------------------------------------------

void put_u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

void put_int(std::string& out, int64_t v) {
  if (v >= 0 && v < 256) {
    out.push_back(static_cast<char>(BININT1));
    out.push_back(static_cast<char>(v));
  } else if (v >= 0 && v < 65536) {
    out.push_back(static_cast<char>(BININT2));
    out.push_back(static_cast<char>(v & 0xff));
    out.push_back(static_cast<char>(v >> 8));
  } else if (v >= INT32_MIN && v <= INT32_MAX) {
    out.push_back(static_cast<char>(BININT));
    put_u32(out, static_cast<uint32_t>(static_cast<int32_t>(v)));
  } else {
    // LONG1: little-endian two's complement, as few bytes as keep the sign.
    std::string bytes;
    const auto u = static_cast<uint64_t>(v);
    for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<char>((u >> (8 * i)) & 0xff));
    while (bytes.size() > 1) {
      const auto last = static_cast<uint8_t>(bytes.back());
      const auto prev = static_cast<uint8_t>(bytes[bytes.size() - 2]);
      if ((last == 0 && !(prev & 0x80)) || (last == 0xff && (prev & 0x80))) bytes.pop_back();
      else break;
    }
    out.push_back(static_cast<char>(LONG1));
    out.push_back(static_cast<char>(bytes.size()));
    out += bytes;
  }
}

void put_uint(std::string& out, uint64_t v) {
  if (v <= static_cast<uint64_t>(INT64_MAX)) return put_int(out, static_cast<int64_t>(v));
  out.push_back(static_cast<char>(LONG1));
  out.push_back(9);  // a ninth byte of 0 keeps it positive
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  out.push_back(0);
}

void put_str(std::string& out, const std::string& s) {
  if (s.size() < 256) {
    out.push_back(static_cast<char>(SHORT_BINUNICODE));
    out.push_back(static_cast<char>(s.size()));
  } else {
    if (s.size() > UINT32_MAX) throw InputError("pickle: a string of " + std::to_string(s.size()) + " bytes is too long");
    out.push_back(static_cast<char>(BINUNICODE));
    put_u32(out, static_cast<uint32_t>(s.size()));
  }
  out += s;
}

void put(std::string& out, const nlohmann::json& v) {
  using T = nlohmann::json::value_t;
  switch (v.type()) {
    case T::null: out.push_back(static_cast<char>(NONE)); break;
    case T::boolean: out.push_back(static_cast<char>(v.get<bool>() ? NEWTRUE : NEWFALSE)); break;
    case T::number_integer: put_int(out, v.get<int64_t>()); break;
    case T::number_unsigned: put_uint(out, v.get<uint64_t>()); break;
    case T::number_float: {
      out.push_back(static_cast<char>(BINFLOAT));
      const auto bits = std::bit_cast<uint64_t>(v.get<double>());
      for (int i = 7; i >= 0; --i) out.push_back(static_cast<char>((bits >> (8 * i)) & 0xff));  // big-endian
      break;
    }
    case T::string: put_str(out, v.get_ref<const std::string&>()); break;
    case T::array: {
      out.push_back(static_cast<char>(EMPTY_LIST));
      // Batches of 1000, as Python's pickler does (bounded unpickler stacks).
      for (std::size_t i = 0; i < v.size(); i += 1000) {
        out.push_back(static_cast<char>(MARK));
        for (std::size_t k = i; k < std::min(v.size(), i + 1000); ++k) put(out, v[k]);
        out.push_back(static_cast<char>(APPENDS));
      }
      break;
    }
    case T::object: {
      out.push_back(static_cast<char>(EMPTY_DICT));
      std::size_t n = 0;
      for (auto it = v.begin(); it != v.end(); ++it, ++n) {
        if (n % 1000 == 0) {
          if (n) out.push_back(static_cast<char>(SETITEMS));
          out.push_back(static_cast<char>(MARK));
        }
        put_str(out, it.key());
        put(out, it.value());
      }
      if (n) out.push_back(static_cast<char>(SETITEMS));
      break;
    }
    default: throw InternalError("pickle: cannot write a JSON value of this type");
  }
}

// ---- reading ------------------------------------------------------------------

// Values are shared while unpickling: the memo refers to the live object (a
// dict is memoized empty and filled afterwards).
struct Node;
using NodeP = std::shared_ptr<Node>;
struct Node {
  enum Kind { Null, Bool, Int, Float, Str, List, Dict } kind = Null;
  bool b = false;
  int64_t i = 0;
  double f = 0;
  std::string s;
  std::vector<NodeP> items;                      // List
  std::vector<std::pair<NodeP, NodeP>> entries;  // Dict
};

NodeP make(Node::Kind k) {
  auto n = std::make_shared<Node>();
  n->kind = k;
  return n;
}

class Reader {
 public:
  Reader(std::string_view b, const std::string& origin) : b_(b), origin_(origin) {}

  NodeP run() {
    while (true) {
      if (pos_ >= b_.size()) fail("ends before the STOP opcode");
      const std::size_t at = pos_;
      const uint8_t op = u8();
      switch (op) {
        case PROTO: {
          const uint8_t v = u8();
          if (v > 5) fail_at(at, "pickle protocol " + std::to_string(v) + " is newer than 5");
          break;
        }
        case FRAME: (void)take(8); break;
        case STOP: {
          if (stack_.size() != 1 || !marks_.empty()) fail_at(at, "STOP with " + std::to_string(stack_.size()) + " values on the stack");
          return stack_.back();
        }
        case MARK: marks_.push_back(stack_.size()); break;
        case POP: pop(); break;
        case POP_MARK: (void)since_mark(); break;
        case DUP: push(top()); break;
        case NONE: push(make(Node::Null)); break;
        case NEWTRUE:
        case NEWFALSE: {
          auto n = make(Node::Bool);
          n->b = op == NEWTRUE;
          push(n);
          break;
        }
        case BININT1: push_int(u8()); break;
        case BININT2: {
          const auto lo = u8();
          push_int(lo | (u8() << 8));
          break;
        }
        case BININT: push_int(static_cast<int32_t>(u32())); break;
        case LONG1: push_long(take(u8()), at); break;
        case LONG4: push_long(take(u32()), at); break;
        case INT:
        case LONG: {
          std::string t = line();
          if (!t.empty() && t.back() == 'L') t.pop_back();
          if (op == INT && (t == "00" || t == "01")) {
            auto n = make(Node::Bool);
            n->b = t == "01";
            push(n);
            break;
          }
          try {
            std::size_t used = 0;
            const long long x = std::stoll(t, &used);
            if (used != t.size()) throw std::invalid_argument(t);
            push_int(x);
          } catch (const std::exception&) {
            fail_at(at, "integer '" + t + "' is not a 64-bit integer");
          }
          break;
        }
        case BINFLOAT: {
          uint64_t bits = 0;
          for (char c : take(8)) bits = (bits << 8) | static_cast<uint8_t>(c);
          auto n = make(Node::Float);
          n->f = std::bit_cast<double>(bits);
          push(n);
          break;
        }
        case FLOAT: {
          const std::string t = line();
          auto n = make(Node::Float);
          try {
            n->f = std::stod(t);
          } catch (const std::exception&) {
            fail_at(at, "float '" + t + "' cannot be read");
          }
          push(n);
          break;
        }
        case SHORT_BINUNICODE: push_str(take(u8())); break;
        case BINUNICODE: push_str(take(u32())); break;
        case BINUNICODE8: push_str(take(u64())); break;
        case SHORT_BINSTRING: push_str(take(u8())); break;  // Python 2 str: text
        case BINSTRING: push_str(take(u32())); break;
        case UNICODE: push_str(line()); break;
        case STRING: {
          std::string t = line();
          if (t.size() >= 2 && (t.front() == '\'' || t.front() == '"')) t = t.substr(1, t.size() - 2);
          push_str(t);
          break;
        }
        case EMPTY_LIST: push(make(Node::List)); break;
        case EMPTY_TUPLE: push(make(Node::List)); break;
        case EMPTY_SET: push(make(Node::List)); break;
        case EMPTY_DICT: push(make(Node::Dict)); break;
        case LIST:
        case TUPLE:
        case FROZENSET: {
          auto n = make(Node::List);
          n->items = since_mark();
          push(n);
          break;
        }
        case TUPLE1:
        case TUPLE2:
        case TUPLE3: {
          const std::size_t k = op - TUPLE1 + 1;
          if (stack_.size() < k + base()) fail_at(at, "tuple of " + std::to_string(k) + " with fewer values on the stack");
          auto n = make(Node::List);
          n->items.assign(stack_.end() - static_cast<std::ptrdiff_t>(k), stack_.end());
          stack_.resize(stack_.size() - k);
          push(n);
          break;
        }
        case DICT: {
          auto n = make(Node::Dict);
          add_entries(*n, since_mark(), at);
          push(n);
          break;
        }
        case APPEND: {
          auto v = pop();
          list_at_top(at).items.push_back(std::move(v));
          break;
        }
        case APPENDS:
        case ADDITEMS: {
          auto vs = since_mark();
          auto& l = list_at_top(at);
          l.items.insert(l.items.end(), vs.begin(), vs.end());
          break;
        }
        case SETITEM: {
          auto v = pop();
          auto k = pop();
          dict_at_top(at).entries.emplace_back(std::move(k), std::move(v));
          break;
        }
        case SETITEMS: {
          auto kv = since_mark();
          add_entries(dict_at_top(at), std::move(kv), at);
          break;
        }
        case MEMOIZE: memo_.push_back(top()); break;
        case BINPUT: memo_put(u8()); break;
        case LONG_BINPUT: memo_put(u32()); break;
        case PUT: memo_put(index(line(), at)); break;
        case BINGET: memo_get(u8(), at); break;
        case LONG_BINGET: memo_get(u32(), at); break;
        case GET: memo_get(index(line(), at), at); break;
        case 'c':
        case 0x93:  // STACK_GLOBAL
        case 'R':
        case 0x81:  // NEWOBJ
        case 0x92:  // NEWOBJ_EX
        case 'b':   // BUILD
        case 'i':   // INST
        case 'o':   // OBJ
          fail_at(at, "it holds a Python object (opcode 0x" + hex(op) + "); only plain data (dicts, lists, strings, numbers) is read");
        default:
          fail_at(at, "unknown or unsupported opcode 0x" + hex(op) + " (bytes are not read)");
      }
    }
  }

 private:
  [[noreturn]] void fail(const std::string& what) const { fail_at(pos_, what); }
  [[noreturn]] void fail_at(std::size_t at, const std::string& what) const {
    throw InputError(origin_ + ": not a readable pickle at byte " + std::to_string(at) + ": " + what);
  }
  static std::string hex(uint8_t v) {
    const char* d = "0123456789abcdef";
    return {d[v >> 4], d[v & 15]};
  }
  std::string_view take(uint64_t n) {
    if (n > b_.size() - pos_) fail("a field of " + std::to_string(n) + " bytes runs past the end of the file");
    auto s = b_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  uint8_t u8() { return static_cast<uint8_t>(take(1)[0]); }
  uint32_t u32() {
    uint32_t v = 0;
    auto s = take(4);
    for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(s[static_cast<std::size_t>(i)]);
    return v;
  }
  uint64_t u64() {
    uint64_t v = 0;
    auto s = take(8);
    for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(s[static_cast<std::size_t>(i)]);
    return v;
  }
  std::string line() {
    const auto end = b_.find('\n', pos_);
    if (end == std::string_view::npos) fail("a text field has no end of line");
    std::string s(b_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return s;
  }
  std::size_t index(const std::string& t, std::size_t at) const {
    try {
      return static_cast<std::size_t>(std::stoull(t));
    } catch (const std::exception&) {
      fail_at(at, "memo index '" + t + "' is not a number");
    }
  }
  std::size_t base() const { return marks_.empty() ? 0 : marks_.back(); }
  void push(NodeP n) {
    if (stack_.size() >= kMaxPickleValues) fail("more than " + std::to_string(kMaxPickleValues) + " values on the stack");
    stack_.push_back(std::move(n));
  }
  NodeP pop() {
    if (stack_.size() <= base()) fail("a value is taken from an empty stack");
    auto n = std::move(stack_.back());
    stack_.pop_back();
    return n;
  }
  const NodeP& top() {
    if (stack_.size() <= base()) fail("a value is read from an empty stack");
    return stack_.back();
  }
  std::vector<NodeP> since_mark() {
    if (marks_.empty()) fail("no MARK to collect values from");
    const std::size_t m = marks_.back();
    marks_.pop_back();
    std::vector<NodeP> out(stack_.begin() + static_cast<std::ptrdiff_t>(m), stack_.end());
    stack_.resize(m);
    return out;
  }
  Node& list_at_top(std::size_t at) {
    if (stack_.empty() || stack_.back()->kind != Node::List)
      fail_at(at, "items are appended to something that is not a list");
    return *stack_.back();
  }
  Node& dict_at_top(std::size_t at) {
    if (stack_.empty() || stack_.back()->kind != Node::Dict) fail_at(at, "items are set on something that is not a dict");
    return *stack_.back();
  }
  void add_entries(Node& d, std::vector<NodeP> kv, std::size_t at) {
    if (kv.size() % 2) fail_at(at, "a dict gets an odd number of keys and values");
    for (std::size_t i = 0; i < kv.size(); i += 2) d.entries.emplace_back(std::move(kv[i]), std::move(kv[i + 1]));
  }
  void push_int(int64_t v) {
    auto n = make(Node::Int);
    n->i = v;
    push(n);
  }
  void push_long(std::string_view bytes, std::size_t at) {
    if (bytes.size() > 8) fail_at(at, "an integer of " + std::to_string(bytes.size()) + " bytes does not fit 64 bits");
    uint64_t u = 0;
    for (std::size_t k = bytes.size(); k-- > 0;) u = (u << 8) | static_cast<uint8_t>(bytes[k]);
    if (!bytes.empty() && bytes.size() < 8 && (static_cast<uint8_t>(bytes.back()) & 0x80))
      u |= ~uint64_t{0} << (8 * bytes.size());  // sign-extend
    push_int(static_cast<int64_t>(u));
  }
  void push_str(std::string_view s) {
    auto n = make(Node::Str);
    n->s = std::string(s);
    push(n);
  }
  void memo_put(std::size_t k) {
    if (k > kMaxPickleValues) fail("memo index " + std::to_string(k) + " is out of range");
    if (memo_.size() <= k) memo_.resize(k + 1);
    memo_[k] = top();
  }
  void memo_get(std::size_t k, std::size_t at) {
    if (k >= memo_.size() || !memo_[k]) fail_at(at, "memo entry " + std::to_string(k) + " was never stored");
    push(memo_[k]);
  }

  std::string_view b_;
  const std::string& origin_;
  std::size_t pos_ = 0;
  std::vector<NodeP> stack_;
  std::vector<std::size_t> marks_;
  std::vector<NodeP> memo_;
};

struct Converter {
  const std::string& origin;
  std::size_t count = 0;
  int depth = 0;

  nlohmann::json operator()(const Node& n) {
    if (++count > kMaxPickleValues)
      throw InputError(origin + ": more than " + std::to_string(kMaxPickleValues) + " values once shared references are expanded");
    if (++depth > 256) throw InputError(origin + ": nested deeper than 256 levels (or a reference cycle)");
    nlohmann::json out;
    switch (n.kind) {
      case Node::Null: break;
      case Node::Bool: out = n.b; break;
      case Node::Int: out = n.i; break;
      case Node::Float: out = n.f; break;
      case Node::Str: out = n.s; break;
      case Node::List:
        out = nlohmann::json::array();
        for (const auto& x : n.items) out.push_back((*this)(*x));
        break;
      case Node::Dict:
        out = nlohmann::json::object();
        for (const auto& [k, v] : n.entries) {
          std::string key;
          if (k->kind == Node::Str) key = k->s;
          else if (k->kind == Node::Int) key = std::to_string(k->i);
          else throw InputError(origin + ": a dict key is neither a string nor an integer");
          out[key] = (*this)(*v);
        }
        break;
    }
    --depth;
    return out;
  }
};

}  // namespace

std::string to_pickle(const nlohmann::json& value) {
  std::string out;
  out.push_back(static_cast<char>(PROTO));
  out.push_back(4);
  put(out, value);
  out.push_back(static_cast<char>(STOP));
  return out;
}

nlohmann::json from_pickle(std::string_view bytes, const std::string& origin) {
  Reader r(bytes, origin);
  const NodeP root = r.run();
  Converter c{origin};
  return c(*root);
}

}  // namespace remat
