// Plan loader: every key and type of docs/plan-format.md checked, one-line errors
// "file: key path: problem" (syntax errors "file:line: problem"), then the plan checker.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <new>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <sstream>
#include <vector>

#include "coopsim/replay/replay_plan.hpp"
#include "coopsim/model/memory_cap.hpp"
#include "coopsim/base/text.hpp"

namespace coopsim::gpu {

namespace {

// A JSON value and its key path, with typed getters that fail with the path.
class Node {
 public:
  Node(const nlohmann::json& j, std::string path, const std::string& file)
      : j_(j), path_(std::move(path)), file_(file) {}

  [[noreturn]] void fail(const std::string& problem) const { throw PlanError(file_, path_, problem); }

  // An object holding exactly `keys` and `more`.
  void expect_object(const std::vector<std::string_view>& keys,
                     std::initializer_list<std::string_view> more = {}) const {
    if (!j_.is_object()) fail("expected an object, got " + got());
    std::vector<std::string_view> all = keys;
    all.insert(all.end(), more.begin(), more.end());
    for (const auto& k : all) {
      if (!j_.contains(std::string(k))) fail(fmt::format("missing key '{}'", k));
    }
    for (const auto& [k, v] : j_.items()) {
      if (std::find(all.begin(), all.end(), k) == all.end()) {
        fail(fmt::format("unknown key '{}' (expected: {})", one_line(k), fmt::join(all, ", ")));
      }
    }
  }
  [[nodiscard]] bool has(std::string_view k) const { return j_.is_object() && j_.contains(std::string(k)); }
  [[nodiscard]] Node key(std::string_view k) const {
    return Node(j_.at(std::string(k)), path_.empty() ? std::string(k) : path_ + "." + std::string(k), file_);
  }
  [[nodiscard]] std::size_t size() const {
    if (!j_.is_array()) fail("expected an array, got " + got());
    return j_.size();
  }
  [[nodiscard]] Node at(std::size_t i) const { return Node(j_.at(i), fmt::format("{}[{}]", path_, i), file_); }

  [[nodiscard]] std::uint64_t u64() const {
    if (!j_.is_number_unsigned()) fail("expected an unsigned integer, got " + got());
    return j_.get<std::uint64_t>();
  }
  [[nodiscard]] std::uint32_t u32() const {
    const std::uint64_t v = u64();
    if (v > std::numeric_limits<std::uint32_t>::max()) fail(fmt::format("{} does not fit 32 bits", v));
    return static_cast<std::uint32_t>(v);
  }
  [[nodiscard]] SimTime ns() const {
    const std::uint64_t v = u64();
    if (v > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
      fail(fmt::format("{} is too large", v));
    return SimTime{static_cast<std::int64_t>(v)};
  }
  [[nodiscard]] double number() const {
    if (!j_.is_number() || j_.get<double>() < 0) fail("expected a non-negative number, got " + got());
    return j_.get<double>();
  }
  [[nodiscard]] bool boolean() const {
    if (!j_.is_boolean()) fail("expected true or false, got " + got());
    return j_.get<bool>();
  }
  [[nodiscard]] std::string str() const {
    if (!j_.is_string()) fail("expected a string, got " + got());
    return j_.get<std::string>();
  }

 private:
  [[nodiscard]] std::string got() const {
    if (j_.is_string()) return "a string";
    if (j_.is_object()) return "an object";
    if (j_.is_array()) return "an array";
    return j_.dump();  // numbers, booleans, null: the value itself
  }
  const nlohmann::json& j_;
  std::string path_;
  const std::string& file_;
};

// Counts what the document's DOM will hold (nlohmann SAX events, the costs of
// coopsim/model/memory_cap.hpp) and stops as soon as it passes the budget: a plan is refused before
// its DOM is built. Syntax errors are left to the real parse, which reports them.
class DomMeter : public nlohmann::json_sax<nlohmann::json> {
 public:
  explicit DomMeter(MemoryCap& memory) : memory_(memory) {}
  [[nodiscard]] bool over() const { return over_; }

  bool null() override { return value(0); }
  bool boolean(bool) override { return value(0); }
  bool number_integer(number_integer_t) override { return value(0); }
  bool number_unsigned(number_unsigned_t) override { return value(0); }
  bool number_float(number_float_t, const string_t&) override { return value(0); }
  bool string(string_t& s) override { return value(s.size()); }
  bool binary(binary_t&) override { return value(0); }
  bool start_object(std::size_t) override { return open(true); }
  bool start_array(std::size_t) override { return open(false); }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }
  bool key(string_t& k) override {
    key_bytes_ = memory_cost::kJsonMember + memory_cost::text(k.size());
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return false; }

 private:
  bool value(std::size_t text) { return count(memory_cost::kJsonValue + memory_cost::text(text)); }
  bool count(std::uint64_t bytes) {
    if (!in_object_.empty() && in_object_.back()) bytes += key_bytes_;
    over_ = !memory_.add(bytes);
    return !over_;
  }
  bool open(bool object) {
    if (!count(memory_cost::kJsonValue + memory_cost::kJsonContainer)) return false;
    in_object_.push_back(object);
    return true;
  }
  bool close() {
    in_object_.pop_back();
    return true;
  }
  MemoryCap& memory_;
  std::vector<bool> in_object_;
  std::uint64_t key_bytes_ = 0;
  bool over_ = false;
};

// Keys every step has.
const std::vector<std::string_view> kCommon = {"id", "kind", "stream", "after", "start_ns", "end_ns"};

class Loader {
 public:
  explicit Loader(const std::string& file) : file_(file) {}

  Plan load(const nlohmann::json& doc) {
    const Node root(doc, "", file_);
    root.expect_object({"format", "version", "coopsim_version", "trace", "allocator", "policy", "budget", "arena_size",
                        "address_base", "link", "simulated", "tensors", "ops", "steps"});
    if (const std::string f = root.key("format").str(); f != kPlanFormat) {
      root.key("format").fail(fmt::format("expected '{}', got '{}'", kPlanFormat, one_line(f)));
    }
    if (const std::uint64_t v = root.key("version").u64(); v != kPlanVersion) {
      root.key("version").fail(fmt::format("unsupported version {} (this coopsim reads version {})", v, kPlanVersion));
    }
    PlanHeader& h = plan_.header;
    h.coopsim_version = root.key("coopsim_version").str();
    read_trace(root.key("trace"));
    h.allocator = root.key("allocator").str();
    h.policy = root.key("policy").str();
    h.budget = Bytes{root.key("budget").u64()};
    h.arena_size = Bytes{root.key("arena_size").u64()};
    h.address_base = root.key("address_base").u64();
    read_link(root.key("link"));
    const Node sim = root.key("simulated");
    sim.expect_object({"time_ns", "stall_ns", "op_time_ns", "recompute_ns"});
    h.simulated_time = sim.key("time_ns").ns();
    h.stall_time = sim.key("stall_ns").ns();
    h.op_time = sim.key("op_time_ns").ns();
    h.recompute_time = sim.key("recompute_ns").ns();
    read_tensors(root.key("tensors"));
    read_ops(root.key("ops"));
    const Node steps = root.key("steps");
    const std::size_t n = steps.size();
    plan_.steps.reserve(n);
    for (std::size_t i = 0; i < n; ++i) plan_.steps.push_back(read_step(steps.at(i), static_cast<std::uint32_t>(i)));
    return std::move(plan_);
  }

 private:
  void read_trace(const Node& t) {
    t.expect_object({"path", "model", "hash", "iterations"});
    PlanHeader& h = plan_.header;
    h.trace_path = t.key("path").str();
    h.model = t.key("model").str();
    const std::string hash = t.key("hash").str();
    if (hash.size() != 16 || hash.find_first_not_of("0123456789abcdef") != std::string::npos) {
      t.key("hash").fail("expected 16 lowercase hexadecimal digits, got '" + one_line(hash) + "'");
    }
    h.trace_hash = std::stoull(hash, nullptr, 16);
    h.iterations = t.key("iterations").u32();
  }

  void read_link(const Node& l) {
    l.expect_object({"name", "d2h_ns_per_byte", "d2h_latency_ns", "h2d_ns_per_byte", "h2d_latency_ns", "serial"});
    PlanLink& k = plan_.header.link;
    k.name = l.key("name").str();
    k.d2h_ns_per_byte = l.key("d2h_ns_per_byte").number();
    k.d2h_latency = l.key("d2h_latency_ns").ns();
    k.h2d_ns_per_byte = l.key("h2d_ns_per_byte").number();
    k.h2d_latency = l.key("h2d_latency_ns").ns();
    k.serial = l.key("serial").boolean();
  }

  void read_tensors(const Node& list) {
    for (std::size_t i = 0, n = list.size(); i < n; ++i) {
      const Node t = list.at(i);
      t.expect_object({"id", "file_id", "size", "name"});
      PlanTensor x{TensorId{t.key("id").u32()}, t.key("file_id").u64(), Bytes{t.key("size").u64()},
                   t.key("name").str()};
      if (!plan_.tensors.empty() && x.id <= plan_.tensors.back().id) {
        t.key("id").fail(
            fmt::format("ids must increase: {} follows {}", index_of(x.id), index_of(plan_.tensors.back().id)));
      }
      plan_.tensors.push_back(std::move(x));
    }
  }

  void read_ops(const Node& list) {
    for (std::size_t i = 0, n = list.size(); i < n; ++i) {
      const Node o = list.at(i);
      o.expect_object({"id", "file_id", "name", "duration_ns"});
      PlanOp x{OpId{o.key("id").u32()}, o.key("file_id").u64(), o.key("name").str(), o.key("duration_ns").ns()};
      if (!plan_.ops.empty() && x.id <= plan_.ops.back().id) {
        o.key("id").fail(
            fmt::format("ids must increase: {} follows {}", index_of(x.id), index_of(plan_.ops.back().id)));
      }
      plan_.ops.push_back(std::move(x));
    }
  }

  TensorId tensor_id(const Node& n) const {
    const TensorId t{n.u32()};
    if (plan_.tensor(t) == nullptr) n.fail(fmt::format("tensor {} is not in the tensors list", index_of(t)));
    return t;
  }

  PlanRef read_ref(const Node& n, bool with_version) const {
    PlanRef r;
    r.tensor = tensor_id(n.key("tensor"));
    if (with_version) r.version = n.key("version").u32();
    r.offset = n.key("offset").u64();
    r.size = Bytes{n.key("size").u64()};
    return r;
  }

  std::vector<PlanRef> read_refs(const Node& list) const {
    std::vector<PlanRef> out;
    for (std::size_t i = 0, n = list.size(); i < n; ++i) {
      const Node r = list.at(i);
      r.expect_object({"tensor", "version", "offset", "size"});
      out.push_back(read_ref(r, true));
    }
    return out;
  }

  PlanStep read_step(const Node& n, std::uint32_t index) const {
    // The kind decides the other keys: read it first.
    if (!n.has("kind")) n.expect_object({"id", "kind"});
    const std::string kind_name = n.key("kind").str();
    const auto kind = parse_step_kind(kind_name);
    if (!kind) {
      n.key("kind").fail("unknown step kind '" + one_line(kind_name) +
                         "' (expected: alloc, free, evict, op, recompute, access, swap_out, swap_in)");
    }
    switch (*kind) {
      case StepKind::Alloc: n.expect_object(kCommon, {"tensor", "offset", "size", "fresh", "fill"}); break;
      case StepKind::Free: n.expect_object(kCommon, {"tensor", "offset", "size"}); break;
      case StepKind::Evict: n.expect_object(kCommon, {"tensor", "version", "offset", "size", "forced"}); break;
      case StepKind::Access: n.expect_object(kCommon, {"tensor", "version", "offset", "size"}); break;
      case StepKind::Op: n.expect_object(kCommon, {"op", "reads", "writes"}); break;
      case StepKind::Recompute: n.expect_object(kCommon, {"op", "origin", "reads", "writes"}); break;
      case StepKind::SwapOut:
      case StepKind::SwapIn: n.expect_object(kCommon, {"tensor", "version", "offset", "size", "bytes"}); break;
    }
    PlanStep s;
    s.kind = *kind;
    if (const std::uint64_t id = n.key("id").u64(); id != index) {
      n.key("id").fail(fmt::format("expected {} (steps are numbered in order)", index));
    }
    const std::string stream = n.key("stream").str();
    const auto parsed = parse_stream(stream);
    if (!parsed || *parsed != stream_of(s.kind)) {
      n.key("stream").fail(fmt::format("a {} step runs on stream '{}', got '{}'", kind_name,
                                       to_string(stream_of(s.kind)), one_line(stream)));
    }
    s.stream = *parsed;
    const Node after = n.key("after");
    for (std::size_t i = 0, k = after.size(); i < k; ++i) {
      const StepId a{after.at(i).u32()};
      if (index_of(a) >= index) after.at(i).fail(fmt::format("step {} is not an earlier step", index_of(a)));
      if (!s.after.empty() && a <= s.after.back()) after.at(i).fail("entries must increase");
      s.after.push_back(a);
    }
    s.start = n.key("start_ns").ns();
    s.end = n.key("end_ns").ns();
    if (s.end < s.start)
      n.key("end_ns").fail(fmt::format("ends ({}) before it starts ({})", s.end.count(), s.start.count()));
    switch (s.kind) {
      case StepKind::Alloc:
        s.block = read_ref(n, false);
        s.fresh = n.key("fresh").boolean();
        s.fill = n.key("fill").boolean();
        if (s.fill && !s.fresh) n.key("fill").fail("only a fresh allocation starts with version 0");
        break;
      case StepKind::Free: s.block = read_ref(n, false); break;
      case StepKind::Evict:
        s.block = read_ref(n, true);
        s.forced = n.key("forced").boolean();
        break;
      case StepKind::Access: s.block = read_ref(n, true); break;
      case StepKind::Op:
      case StepKind::Recompute: read_op_step(n, index, s); break;
      case StepKind::SwapOut:
      case StepKind::SwapIn:
        s.block = read_ref(n, true);
        s.bytes = Bytes{n.key("bytes").u64()};
        if (s.bytes > s.block.size)
          n.key("bytes").fail(fmt::format("{} bytes do not fit the block of {}", s.bytes.value, s.block.size.value));
        break;
    }
    return s;
  }

  void read_op_step(const Node& n, std::uint32_t index, PlanStep& s) const {
    s.op = OpId{n.key("op").u32()};
    if (plan_.op(s.op) == nullptr) n.key("op").fail(fmt::format("op {} is not in the ops list", index_of(s.op)));
    if (s.kind == StepKind::Recompute) {
      s.origin = StepId{n.key("origin").u32()};
      if (index_of(s.origin) >= index || plan_.step(s.origin).kind != StepKind::Op || plan_.step(s.origin).op != s.op) {
        n.key("origin").fail(fmt::format("expected an earlier op step of op {}", index_of(s.op)));
      }
    }
    s.reads = read_refs(n.key("reads"));
    s.writes = read_refs(n.key("writes"));
  }

  const std::string& file_;
  Plan plan_;
};

}  // namespace

Plan parse_plan(const std::string& text, const std::string& file, const Limits& limits) {
  // The DOM and the plan read from it (no larger than its DOM) must fit beside the text.
  MemoryCap memory(limits.max_memory);
  DomMeter meter(memory);
  if (!memory.add(text.size())) throw Error(fmt::format("{}: {}", file, memory.problem()));
  (void)nlohmann::json::sax_parse(text, &meter, nlohmann::json::input_format_t::json, false);
  if (meter.over() || !memory.add(memory.used() - text.size()))
    throw Error(fmt::format("{}: {}", file, memory.problem()));
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    const auto line = line_of_offset(text, e.byte == 0 ? 0 : e.byte - 1);
    std::string msg = e.what();
    if (auto p = msg.find("syntax error"); p != std::string::npos) msg = msg.substr(p);
    throw InputError(file, line, "invalid JSON: " + one_line(msg));
  } catch (const nlohmann::json::out_of_range& e) {
    // A number beyond double, e.g. 1e999: the line where that literal first appears.
    const auto [msg, at] = locate_json_overflow(e.what(), text);
    throw InputError(file, line_of_offset(text, at), "invalid JSON: " + one_line(msg));
  }
  return Loader(file).load(doc);
}

namespace {

Plan load_checked(const std::string& path, bool check, const Limits& limits) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw Error(path + ": cannot open plan file");
  const std::streamoff size = in.tellg();
  if (size < 0) throw Error(path + ": cannot read plan file");
  if (static_cast<std::uint64_t>(size) > limits.max_input_bytes) {
    throw Error(
        fmt::format("{}: {}", path, limit_problem(limits.max_input_bytes, "bytes of input", "max_input_bytes")));
  }
  if (static_cast<std::uint64_t>(size) > limits.max_memory) {
    throw Error(fmt::format("{}: {}", path, limit_problem(limits.max_memory, "bytes of memory", "max_memory")));
  }
  in.seekg(0);
  std::string text(static_cast<std::size_t>(size), '\0');
  if (!in.read(text.data(), size)) throw Error(path + ": cannot read plan file");
  Plan plan = parse_plan(text, path, limits);
  if (check) check_plan(plan, path);
  return plan;
}

}  // namespace

Plan load_plan(const std::string& path, bool check, const Limits& limits) {
  try {
    return load_checked(path, check, limits);
  } catch (const std::bad_alloc&) {
    throw out_of_memory(path, limits.max_memory);
  }
}

}  // namespace coopsim::gpu
