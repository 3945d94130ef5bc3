// Execution Trace reader: streams "nodes" (one DOM per node, through the Kineto reader's SAX
// layer, so a large ET never sits in memory whole) and keeps per node only what the link and
// the dataflow need. Both JSON layouts are read, told apart per node:
//  * schema 1.0.1 (2023): name, id, rf_id, parent, tid, scope, inputs / input_types,
//    outputs / output_types as parallel arrays;
//  * 1.0.2-chakra.0.0.4 and later: id, name, ctrl_deps (the parent), inputs / outputs as
//    {values, shapes, types}, and rf_id / tid / scope among attrs [{name, type, value}].
// (Writer: pytorch/pytorch torch/csrc/profiler/standalone/execution_trace_observer.cpp.)
// A value whose type names a tensor ("Tensor(float)", "GenericList[Tensor(float),...]") is a
// tuple [tensor id, storage id, offset, numel, element bytes, device] or a list of them.
#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <map>

#include "coopsim/base/error.hpp"
#include "et_detail.hpp"

namespace coopsim::et_detail {
namespace {

using json = nlohmann::json;
using kineto_detail::describe;
using kineto_detail::RawEvent;

class NodeReader {
 public:
  NodeReader(const std::string& path, const Limits& limits, EtTrace& et, MemoryCap& memory)
      : path_(path), limits_(limits), et_(et), memory_(memory) {}

  void add(const RawEvent& e) {
    e_ = &e;
    written_.clear();
    id_.reset();
    if (e.index >= limits_.max_events) fail(limit_problem(limits_.max_events, "ET nodes", "max_events"));
    const json& v = e.value;
    EtNode n;
    n.index = e.index;
    n.line = e.line;
    n.id = integer(v, "id", "id", true).value();
    id_ = n.id;
    n.name = name_index(string(v, "name", "name"));
    const json* inputs = find(v, "inputs");
    const bool chakra = inputs != nullptr && inputs->is_object();
    if (chakra) {
      ++et_.chakra_nodes;
      n.parent = integer(v, "ctrl_deps", "ctrl_deps", false).value_or(-1);
      const json* attrs = find(v, "attrs");
      if (attrs != nullptr && !attrs->is_array())
        fail(fmt::format("field 'attrs' must be an array (got {})", describe(*attrs)));
      if (attrs != nullptr) {
        for (std::size_t i = 0; i < attrs->size(); ++i) {
          const json& a = (*attrs)[i];
          const std::string where = fmt::format("attrs[{}]", i);
          if (!a.is_object()) fail(fmt::format("{} must be an object (got {})", where, describe(a)));
          const json* name = find(a, "name");
          if (name == nullptr || !name->is_string()) fail(fmt::format("{}: field 'name' must be a string", where));
          const std::string& key = name->get_ref<const std::string&>();
          if (key == "rf_id") n.rf_id = integer(a, "value", where + ".value", true).value();
          if (key == "tid") n.tid = integer(a, "value", where + ".value", true).value();
          if (key == "scope") n.scope = integer(a, "value", where + ".value", true).value();
          if (key == "op_schema") {
            const json* s = find(a, "value");
            if (s != nullptr && s->is_string()) {
              written_ = written_arguments(s->get<std::string>());
              n.has_schema = !s->get_ref<const std::string&>().empty();
            }
          }
        }
      }
      tensors(v, "inputs", true, n.inputs);
      tensors(v, "outputs", true, n.outputs);
    } else {
      ++et_.flat_nodes;
      n.parent = integer(v, "parent", "parent", false).value_or(-1);
      n.rf_id = integer(v, "rf_id", "rf_id", false).value_or(-1);
      n.tid = integer(v, "tid", "tid", false).value_or(0);
      n.scope = integer(v, "scope", "scope", false).value_or(0);
      if (const json* s = find(v, "op_schema"); s != nullptr && s->is_string()) {
        written_ = written_arguments(s->get<std::string>());
        n.has_schema = !s->get_ref<const std::string&>().empty();
      }
      tensors(v, "inputs", false, n.inputs);
      tensors(v, "outputs", false, n.outputs);
    }
    if (!memory_.add(kNodeBytes + kTensorBytes * (n.inputs.size() + n.outputs.size()))) fail(memory_.problem());
    et_.nodes.push_back(std::move(n));
  }

 private:
  [[noreturn]] void fail(const std::string& problem) const {
    const std::string id = id_ ? fmt::format(" (id {})", *id_) : "";
    throw InputError(path_, e_->line, fmt::format("nodes[{}]{}: {}", e_->index, id, problem));
  }

  static const json* find(const json& obj, const char* key) {
    const auto it = obj.find(key);
    return it == obj.end() ? nullptr : &*it;
  }

  std::string string(const json& obj, const char* key, const std::string& shown) const {
    const json* v = find(obj, key);
    if (v == nullptr) fail(fmt::format("missing field '{}'", shown));
    if (!v->is_string()) fail(fmt::format("field '{}' must be a string (got {})", shown, describe(*v)));
    return v->get<std::string>();
  }

  std::optional<std::int64_t> integer(const json& obj, const char* key, const std::string& shown, bool required) const {
    const json* v = find(obj, key);
    if (v == nullptr) {
      if (required) fail(fmt::format("missing field '{}'", shown));
      return std::nullopt;
    }
    if (!v->is_number_integer() ||
        (v->is_number_unsigned() &&
         v->get<std::uint64_t>() > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))) {
      fail(fmt::format("field '{}' must be an integer (got {})", shown, describe(*v)));
    }
    return v->get<std::int64_t>();
  }

  static std::uint32_t intern(std::vector<std::string>& table, const std::string& s) {
    const auto it = std::find(table.begin(), table.end(), s);
    if (it != table.end()) return static_cast<std::uint32_t>(it - table.begin());
    table.push_back(s);
    return static_cast<std::uint32_t>(table.size() - 1);
  }

  std::uint32_t name_index(const std::string& s) {
    const auto [it, fresh] = name_ids_.try_emplace(s, static_cast<std::uint32_t>(et_.names.size()));
    if (fresh && !memory_.add(2 * memory_cost::label(s) + 64)) fail(memory_.problem());
    if (fresh) et_.names.push_back(s);
    return it->second;
  }

  // inputs / outputs: values and types, in either layout.
  void tensors(const json& v, const char* side, bool chakra, std::vector<EtTensor>& out) {
    const json* values = nullptr;
    const json* types = nullptr;
    std::string values_name, types_name;
    if (chakra) {
      const json* found = find(v, side);
      if (found == nullptr) return;
      const json& io = *found;
      if (!io.is_object()) fail(fmt::format("field '{}' must be an object (got {})", side, describe(io)));
      values = find(io, "values");
      types = find(io, "types");
      values_name = fmt::format("{}.values", side);
      types_name = fmt::format("{}.types", side);
    } else {
      values = find(v, side);
      types_name = std::string(side) == "inputs" ? "input_types" : "output_types";
      types = find(v, types_name.c_str());
      values_name = side;
    }
    if (values == nullptr && types == nullptr) return;
    if (values == nullptr || !values->is_array()) fail(fmt::format("field '{}' must be an array", values_name));
    if (types == nullptr || !types->is_array()) fail(fmt::format("field '{}' must be an array", types_name));
    if (types->size() != values->size()) {
      fail(fmt::format("'{}' has {} entries but '{}' has {}", values_name, values->size(), types_name, types->size()));
    }
    for (std::size_t i = 0; i < values->size(); ++i) {
      const json& type = (*types)[i];
      if (!type.is_string()) fail(fmt::format("{}[{}] must be a string (got {})", types_name, i, describe(type)));
      const std::string& t = type.get_ref<const std::string&>();
      if (t.find("Tensor") == std::string::npos) continue;
      const std::string where = fmt::format("{}[{}]", values_name, i);
      const std::size_t first = out.size();
      if (t.rfind("Tensor", 0) == 0) {
        out.push_back(tuple((*values)[i], where));
      } else {
        list((*values)[i], where, out, 0);
      }
      const bool written = std::string(side) == "inputs" && i < written_.size() && written_[i];
      for (std::size_t k = first; k < out.size(); ++k) out[k].written = written;
      if (out.size() > limits_.max_op_fan_in)
        fail(limit_problem(limits_.max_op_fan_in, "tensors in " + std::string(side), "max_op_fan_in"));
    }
  }

  // A tensor list (possibly nested, with "<None>" / null holes for optional tensors).
  void list(const json& value, const std::string& where, std::vector<EtTensor>& out, int depth) {
    if (!value.is_array()) return;  // "<None>" and other scalars: no tensor
    if (depth > 8) fail(fmt::format("{}: tensor lists nested too deep", where));
    if (looks_like_tuple(value)) {
      out.push_back(tuple(value, where));
      return;
    }
    for (std::size_t i = 0; i < value.size(); ++i) list(value[i], fmt::format("{}[{}]", where, i), out, depth + 1);
  }

  static bool looks_like_tuple(const json& v) { return v.size() == 6 && v[5].is_string() && v[0].is_number(); }

  EtTensor tuple(const json& v, const std::string& where) {
    constexpr const char* kShape = "a tensor tuple [tensor id, storage id, offset, numel, element bytes, device]";
    if (!v.is_array() || v.size() != 6) {
      fail(fmt::format("{}: expected {} (got {})", where, kShape,
                       v.is_array() ? fmt::format("an array of {}", v.size()) : describe(v)));
    }
    std::uint64_t f[5];
    for (int k = 0; k < 5; ++k) {
      if (!v[k].is_number_integer() ||
          (v[k].is_number_integer() && !v[k].is_number_unsigned() && v[k].get<std::int64_t>() < 0)) {
        fail(fmt::format("{}[{}]: expected a non-negative integer in {} (got {})", where, k, kShape, describe(v[k])));
      }
      f[k] = v[k].get<std::uint64_t>();
    }
    if (!v[5].is_string())
      fail(fmt::format("{}[5]: expected a device string in {} (got {})", where, kShape, describe(v[5])));
    EtTensor t{f[0], f[1], f[2], f[3], f[4], intern(et_.devices, v[5].get<std::string>())};
    return t;
  }

  const std::string& path_;
  const Limits& limits_;
  EtTrace& et_;
  MemoryCap& memory_;
  const RawEvent* e_ = nullptr;
  std::optional<std::int64_t> id_;
  std::vector<bool> written_;  // of the current node's schema arguments
  std::map<std::string, std::uint32_t> name_ids_;
};

}  // namespace

EtTrace read_et(const std::string& path, const Limits& limits, MemoryCap& memory) {
  EtTrace et;
  NodeReader reader(path, limits, et, memory);
  kineto_detail::ArrayFormat format;
  format.key = "nodes";
  format.what = "an Execution Trace";
  format.element = "a node";
  format.bare_array = false;
  const kineto_detail::TopLevel top =
      kineto_detail::read_json_array(path, limits.max_input_bytes, memory, format, [&](RawEvent& e) { reader.add(e); });
  if (const auto it = top.fields.find("schema"); it != top.fields.end() && it->is_string())
    et.schema = it->get<std::string>();
  if (const auto it = top.fields.find("pid"); it != top.fields.end() && it->is_number_integer())
    et.pid = it->get<std::int64_t>();
  if (et.nodes.empty()) throw InputError(path, 0, "the Execution Trace has no nodes");
  std::stable_sort(et.nodes.begin(), et.nodes.end(), [](const EtNode& a, const EtNode& b) { return a.id < b.id; });
  for (std::size_t i = 1; i < et.nodes.size(); ++i) {
    if (et.nodes[i].id == et.nodes[i - 1].id) {
      throw InputError(path, et.nodes[i].line,
                       fmt::format("nodes[{}]: duplicate node id {} (also nodes[{}])", et.nodes[i].index,
                                   et.nodes[i].id, et.nodes[i - 1].index));
    }
  }
  return et;
}

std::vector<bool> written_arguments(const std::string& schema) {
  std::vector<bool> out;
  const auto open = schema.find('(');
  if (open == std::string::npos) return out;
  int depth = 0;
  std::string arg;
  const auto finish = [&] {
    const auto b = arg.find_first_not_of(' ');
    if (b != std::string::npos && arg.substr(b) != "*") out.push_back(arg.find('!') != std::string::npos);
    arg.clear();
  };
  for (std::size_t i = open + 1; i < schema.size(); ++i) {
    const char ch = schema[i];
    if (ch == '(' || ch == '[' || ch == '<') ++depth;
    if (ch == ')' || ch == ']' || ch == '>') {
      if (depth == 0) {
        finish();
        return out;
      }
      --depth;
    }
    if (ch == ',' && depth == 0) {
      finish();
    } else {
      arg += ch;
    }
  }
  return {};  // unbalanced: no information
}

bool is_range(const EtTrace& et, const EtNode& n) {
  const std::string& name = et.names[n.name];
  return n.scope == 7 || name.rfind("[pytorch|profiler|", 0) == 0 || name.rfind("## ", 0) == 0 ||
         name.find('#') != std::string::npos;
}

}  // namespace coopsim::et_detail
