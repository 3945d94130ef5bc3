// Kineto event classification: turns each parsed traceEvents element into a compact record
// (CPU op, ProfilerStep, runtime call, GPU activity, memory / OOM event) and checks the types
// of the fields it uses. Categories of both vocabularies are recognised
// (docs/import-kineto.md, "What is read"): 2021-era Operator / Kernel / Runtime / Memcpy /
// Memset and 2023+ cpu_op / kernel / cuda_runtime / cuda_driver / gpu_memcpy / gpu_memset /
// user_annotation. Events of other kinds are skipped without checks.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "coopsim/base/error.hpp"
#include "kineto_detail.hpp"

namespace coopsim::kineto_detail {
namespace {

using json = nlohmann::json;

enum class Category : std::uint8_t { Op, Annotation, Runtime, Gpu, Other };

struct CategoryName {
  std::string_view name;
  Category category;
  bool legacy;  // 2021-era vocabulary
};
constexpr std::array<CategoryName, 13> kCategories{{
    {"Operator", Category::Op, true},
    {"cpu_op", Category::Op, false},
    {"user_annotation", Category::Annotation, false},
    {"gpu_user_annotation", Category::Annotation, false},
    {"Runtime", Category::Runtime, true},
    {"cuda_runtime", Category::Runtime, false},
    {"cuda_driver", Category::Runtime, false},
    {"Kernel", Category::Gpu, true},
    {"kernel", Category::Gpu, false},
    {"Memcpy", Category::Gpu, true},
    {"gpu_memcpy", Category::Gpu, false},
    {"Memset", Category::Gpu, true},
    {"gpu_memset", Category::Gpu, false},
}};

// "ProfilerStep#N" -> N.
std::optional<std::uint64_t> profiler_step(std::string_view name) {
  constexpr std::string_view kPrefix = "ProfilerStep#";
  if (name.substr(0, kPrefix.size()) != kPrefix || name.size() == kPrefix.size() || name.size() > kPrefix.size() + 18) {
    return std::nullopt;
  }
  std::uint64_t n = 0;
  for (const char c : name.substr(kPrefix.size())) {
    if (c < '0' || c > '9') return std::nullopt;
    n = n * 10 + static_cast<std::uint64_t>(c - '0');
  }
  return n;
}

// Typed access to one event's fields; every problem names the event.
class Fields {
 public:
  Fields(const std::string& path, const RawEvent& e) : path_(path), e_(e) {}

  [[noreturn]] void fail(const std::string& problem) const {
    throw InputError(path_, e_.line, fmt::format("traceEvents[{}]: {}", e_.index, problem));
  }

  const json* find(const json& obj, const char* key) const {
    const auto it = obj.find(key);
    return it == obj.end() ? nullptr : &*it;
  }
  const json& need(const json& obj, const char* key, const std::string& shown) const {
    const json* v = find(obj, key);
    if (v == nullptr) fail(fmt::format("missing field '{}'", shown));
    return *v;
  }

  std::string string(const char* key) const {
    const json& v = need(e_.value, key, key);
    if (!v.is_string()) fail(fmt::format("field '{}' must be a string (got {})", key, describe(v)));
    return v.get<std::string>();
  }

  // "ts" / "dur" in microseconds -> ns, exactly.
  std::int64_t time(const char* key, bool non_negative) const {
    const json& v = need(e_.value, key, key);
    const char* what = non_negative ? "a non-negative number" : "a number";
    if (!v.is_number()) fail(fmt::format("field '{}' must be {} (got {})", key, what, describe(v)));
    std::optional<std::int64_t> ns;
    if (v.is_number_float()) {
      const std::string& text = std::string_view(key) == "ts" ? e_.ts_text : e_.dur_text;
      ns = micros_text_to_ns(text.empty() ? v.dump() : text);
    } else {
      ns = micros_text_to_ns(v.dump());
    }
    if (!ns) fail(fmt::format("field '{}' is out of range (got {})", key, describe(v)));
    if (non_negative && *ns < 0) fail(fmt::format("field '{}' must be {} (got {})", key, what, describe(v)));
    return *ns;
  }

  // pid / tid: integers or strings; the 2021 string "25738" and the integer 25738 are equal.
  std::string id(const char* key) const {
    const json& v = need(e_.value, key, key);
    if (v.is_number_integer()) return v.dump();
    if (v.is_string()) return v.get<std::string>();
    fail(fmt::format("field '{}' must be an integer or a string (got {})", key, describe(v)));
  }

  const json* args(bool required) const {
    const json* a = find(e_.value, "args");
    if (a == nullptr) {
      if (required) fail("missing field 'args'");
      return nullptr;
    }
    if (!a->is_object()) fail(fmt::format("field 'args' must be an object (got {})", describe(*a)));
    return a;
  }

  std::optional<std::int64_t> arg_int(const json* args, const char* key, bool required,
                                      bool non_negative = false) const {
    const std::string shown = fmt::format("args.{}", key);
    const json* v = args == nullptr ? nullptr : find(*args, key);
    if (v == nullptr) {
      if (required) fail(fmt::format("missing field '{}'", shown));
      return std::nullopt;
    }
    const char* what = non_negative ? "a non-negative integer" : "an integer";
    if (!v->is_number_integer() ||
        (v->is_number_unsigned() &&
         v->get<std::uint64_t>() > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))) {
      fail(fmt::format("field '{}' must be {} (got {})", shown, what, describe(*v)));
    }
    const auto x = v->get<std::int64_t>();
    if (non_negative && x < 0) fail(fmt::format("field '{}' must be {} (got {})", shown, what, describe(*v)));
    return x;
  }

 private:
  const std::string& path_;
  const RawEvent& e_;
};

}  // namespace

std::optional<std::int64_t> micros_text_to_ns(std::string_view text) {
  // JSON number grammar: -?digits(.digits)?([eE][+-]?digits)? (already validated by the parser).
  std::size_t i = 0;
  const bool negative = i < text.size() && text[i] == '-';
  if (negative) ++i;
  std::string digits;      // all mantissa digits
  long long exponent = 3;  // us -> ns
  bool any = false;
  for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i, any = true) digits += text[i];
  if (i < text.size() && text[i] == '.') {
    for (++i; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i, any = true) {
      digits += text[i];
      --exponent;
    }
  }
  if (!any) return std::nullopt;
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    bool eneg = false;
    if (i < text.size() && (text[i] == '+' || text[i] == '-')) eneg = text[i++] == '-';
    long long e = 0;
    for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) e = std::min(e * 10 + (text[i] - '0'), 100000LL);
    exponent += eneg ? -e : e;
  }
  if (i != text.size()) return std::nullopt;
  // value = digits * 10^exponent ns; keep the integer part, round on the first dropped digit.
  const long long keep = static_cast<long long>(digits.size()) + std::min(exponent, 0LL);
  constexpr auto kMax = static_cast<unsigned long long>(std::numeric_limits<std::int64_t>::max());
  unsigned long long v = 0;
  for (long long k = 0; k < keep; ++k) {
    const auto d = static_cast<unsigned long long>(digits[static_cast<std::size_t>(k)] - '0');
    if (v > (kMax - d) / 10) return std::nullopt;
    v = v * 10 + d;
  }
  for (long long k = 0; k < exponent && v != 0; ++k) {
    if (v > kMax / 10) return std::nullopt;
    v *= 10;
  }
  if (keep >= 0 && static_cast<std::size_t>(keep) < digits.size() && digits[static_cast<std::size_t>(keep)] >= '5') {
    if (v == kMax) return std::nullopt;
    ++v;
  }
  const auto ns = static_cast<std::int64_t>(v);
  return negative ? -ns : ns;
}

std::uint32_t Collector::intern(const std::string& name) {
  const auto [it, fresh] = name_ids_.try_emplace(name, static_cast<std::uint32_t>(out_.names.size()));
  if (fresh) out_.names.push_back(name);
  return it->second;
}

std::uint32_t Collector::thread_of(const RawEvent& e) {
  const Fields f(path_, e);
  const std::string key = f.id("pid") + "/" + f.id("tid");
  const auto [it, fresh] = thread_ids_.try_emplace(key, static_cast<std::uint32_t>(out_.threads.size()));
  if (fresh) out_.threads.push_back(key);
  return it->second;
}

void Collector::add(const RawEvent& e) {
  const Fields f(path_, e);
  const std::string ph = f.string("ph");
  if (ph == "X") {
    add_complete(e);
  } else if (ph == "i" || ph == "I") {
    const json* name = f.find(e.value, "name");
    if (name == nullptr || !name->is_string()) return;  // other instant events are not used
    const auto& n = name->get_ref<const std::string&>();
    if (n == "[memory]") add_instant(e, false);
    if (n == "[OutOfMemory]") add_instant(e, true);
  }
}

void Collector::add_complete(const RawEvent& e) {
  const Fields f(path_, e);
  const json* cat = f.find(e.value, "cat");
  if (cat == nullptr) return;
  if (!cat->is_string()) f.fail(fmt::format("field 'cat' must be a string (got {})", describe(*cat)));
  const auto& cat_name = cat->get_ref<const std::string&>();
  Category category = Category::Other;
  for (const auto& c : kCategories) {
    if (c.name != cat_name) continue;
    category = c.category;
    ++(c.legacy ? out_.legacy_categories : out_.current_categories);
  }
  switch (category) {
    case Category::Op:
    case Category::Annotation: {
      const std::string name = f.string("name");
      if (cat_name == "gpu_user_annotation") {
        ++out_.annotations;
        return;
      }
      if (const auto step = profiler_step(name)) {
        out_.steps.push_back(ProfilerStep{f.time("ts", false), *step});
        return;
      }
      // record_function user ranges are named "Name#Class.method" (Optimizer.step#SGD.step,
      // enumerate(DataLoader)#...); 2021 traces file them under Operator.
      if (category == Category::Annotation || name.find('#') != std::string::npos) {
        ++out_.annotations;
        return;
      }
      OpRange op;
      op.begin = f.time("ts", false);
      const std::int64_t dur = f.time("dur", true);
      if (op.begin > std::numeric_limits<std::int64_t>::max() - dur)
        f.fail("field 'dur' is out of range (ts + dur overflows)");
      op.end = op.begin + dur;
      op.thread = thread_of(e);
      op.name = intern(name);
      op.index = e.index;
      // The ET links its nodes to these ops by this id (rf_id) when both traces carry it.
      if (const auto rf = f.arg_int(f.args(false), "Record function id", false, true)) op.rf_id = *rf;
      out_.ops.push_back(op);
      return;
    }
    case Category::Runtime: {
      const std::int64_t ts = f.time("ts", false);
      const std::uint32_t thread = thread_of(e);
      const auto correlation = f.arg_int(f.args(false), "correlation", false);
      if (correlation) out_.runtime.push_back(RuntimeCall{ts, thread, *correlation});
      return;
    }
    case Category::Gpu: {
      const std::int64_t dur = f.time("dur", true);
      const json* args = f.args(false);
      std::optional<std::int64_t> device = f.arg_int(args, "device", false);
      if (!device) {
        const json* pid = f.find(e.value, "pid");
        if (pid == nullptr || !pid->is_number_integer()) {
          f.fail("GPU event without a device (no integer 'args.device' or 'pid')");
        }
        device = pid->get<std::int64_t>();
      }
      ++out_.gpu_activities;
      out_.devices_seen.insert(*device);
      if (*device != device_) return;
      ++out_.gpu_activities_selected;
      out_.gpu_ns_selected = add_ns(out_.gpu_ns_selected, dur);
      if (const auto correlation = f.arg_int(args, "correlation", false)) {
        std::int64_t& sum = out_.gpu_ns_by_correlation[*correlation];
        sum = add_ns(sum, dur);
      } else {
        out_.gpu_ns_uncorrelated = add_ns(out_.gpu_ns_uncorrelated, dur);
      }
      return;
    }
    case Category::Other: return;
  }
}

void Collector::add_instant(const RawEvent& e, bool oom) {
  const Fields f(path_, e);
  const json* args = f.args(true);
  const std::int64_t type = *f.arg_int(args, "Device Type", true);
  const std::int64_t id = *f.arg_int(args, "Device Id", true);
  MemoryEvent m;
  m.bytes = *f.arg_int(args, "Bytes", true);
  if (const auto addr = f.arg_int(args, "Addr", false, true)) m.addr = static_cast<std::uint64_t>(*addr);
  m.total_allocated = f.arg_int(args, "Total Allocated", false);
  m.total_reserved = f.arg_int(args, "Total Reserved", false);
  m.ts = f.time("ts", false);
  m.thread = thread_of(e);
  m.oom = oom;
  m.index = e.index;
  m.line = e.line;
  auto& counts = out_.memory_counts;
  const bool selected = type == 1 && id == device_;  // c10::DeviceType: 0 CPU, 1 CUDA
  if (type == 1) out_.devices_seen.insert(id);
  if (oom) {
    ++(selected ? counts.ooms : counts.other_device_ooms);
  } else if (selected) {
    ++counts.selected;
  } else {
    ++(type == 0 ? counts.cpu : type == 1 ? counts.other_cuda : counts.other_type);
  }
  if (selected) out_.memory.push_back(m);
}

void CollectedMemory::update(const Collected& c, std::uint64_t line) {
  constexpr std::uint64_t kPending = 24, kMapNode = 64;
  constexpr std::uint64_t kOp = 2 * sizeof(OpRange) + 4 * sizeof(std::uint32_t) + 2 * sizeof(std::uint64_t) +
                                sizeof(std::vector<std::uint32_t>) + kPending + sizeof(OpInfo) + memory_cost::kEvent;
  constexpr std::uint64_t kRuntime = 2 * sizeof(RuntimeCall) + 2 * sizeof(std::uint32_t);
  constexpr std::uint64_t kMemory = 2 * sizeof(MemoryEvent) + sizeof(std::uint32_t) + sizeof(TensorRecord) +
                                    sizeof(MemoryAction) + kPending + sizeof(TensorInfo) + 2 * memory_cost::kEvent +
                                    3 * sizeof(std::uint32_t);
  constexpr std::uint64_t kStep = 3 * sizeof(ProfilerStep) + kPending + memory_cost::kEvent + kMapNode;
  std::uint64_t bytes =
      (c.ops.size() - ops_) * kOp + (c.runtime.size() - runtime_) * kRuntime +
      (c.memory.size() - memory_events_) * kMemory + (c.steps.size() - steps_) * kStep +
      (c.gpu_ns_by_correlation.size() - std::min(correlations_, c.gpu_ns_by_correlation.size())) * kMapNode;
  for (std::size_t i = names_; i < c.names.size(); ++i) bytes += 2 * memory_cost::label(c.names[i]) + kMapNode;
  for (std::size_t i = threads_; i < c.threads.size(); ++i) bytes += 2 * memory_cost::label(c.threads[i]) + kMapNode;
  ops_ = c.ops.size();
  runtime_ = c.runtime.size();
  memory_events_ = c.memory.size();
  steps_ = c.steps.size();
  correlations_ = std::max(correlations_, c.gpu_ns_by_correlation.size());
  names_ = c.names.size();
  threads_ = c.threads.size();
  if (!memory_.add(bytes)) throw InputError(path_, line, memory_.problem());
}

}  // namespace coopsim::kineto_detail
