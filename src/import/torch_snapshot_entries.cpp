// Trace entries of a snapshot (device_traces[d][i], the TraceEntry of pytorch/pytorch @001074d2
// c10/cuda/CUDACachingAllocator.h) as the importer's Entry, checked; and the sink that converts
// them while the pickle streams (coopsim/formats/pickle_stream.hpp), so the history's dicts are
// never all held at once. Keys in errors are built only when an entry is refused.
#include <fmt/format.h>

#include <array>
#include <limits>

#include "coopsim/base/error.hpp"
#include "coopsim/base/text.hpp"
#include "torch_snapshot_detail.hpp"

namespace coopsim::torch_snapshot::detail {
namespace {

using Kind = pickle::Value::Kind;

constexpr std::uint64_t kMaxBytes = std::uint64_t{1} << 53;  // trace v1's largest tensor
constexpr std::int64_t kMaxTimeUs = std::numeric_limits<std::int64_t>::max() / 1000;

// The fields an entry's keys name.
enum class Field : std::uint8_t { Other, Action, Addr, Size, Stream, TimeUs, DeviceFree, UserMetadata, Frames };

Field field_named(std::string_view key) {
  // By length first: most keys are then told apart by one comparison.
  switch (key.size()) {
    case 4: return key == "addr" ? Field::Addr : key == "size" ? Field::Size : Field::Other;
    case 6:
      return key == "action"   ? Field::Action
             : key == "stream" ? Field::Stream
             : key == "frames" ? Field::Frames
                               : Field::Other;
    case 7: return key == "time_us" ? Field::TimeUs : Field::Other;
    case 11: return key == "device_free" ? Field::DeviceFree : Field::Other;
    case 13: return key == "user_metadata" ? Field::UserMetadata : Field::Other;
    default: return Field::Other;
  }
}

// Where a field's value goes; nullptr for frames (a FramesRef) and keys not read.
const pickle::Value** slot_of(EntryFields& f, Field field) {
  switch (field) {
    case Field::Action: return &f.action;
    case Field::Addr: return &f.addr;
    case Field::Size: return &f.size;
    case Field::Stream: return &f.stream;
    case Field::TimeUs: return &f.time_us;
    case Field::DeviceFree: return &f.device_free;
    case Field::UserMetadata: return &f.user_metadata;
    default: return nullptr;
  }
}

EntryFields fields_of(const pickle::Value& e) {
  EntryFields f;
  for (const auto& [k, v] : e.entries) {
    if (k->kind != Kind::String) continue;
    const Field named = field_named(k->text);
    if (named == Field::Frames) {
      // Held elsewhere too (a pickle's shared frames table) when anything but this dict holds it.
      if (f.frames.value == nullptr) f.frames = {v.get(), v.use_count() > 1, &v, nullptr};
      continue;
    }
    const pickle::Value** field = slot_of(f, named);
    if (field != nullptr && *field == nullptr) *field = v.get();
  }
  return f;
}

}  // namespace

const pickle::ValuePtr* member(const pickle::Value& dict, std::string_view key) {
  if (dict.kind != Kind::Dict) return nullptr;
  for (const auto& [k, v] : dict.entries) {
    if (k->kind == Kind::String && k->text == key) return &v;
  }
  return nullptr;
}

std::string describe(const pickle::Value& v) {
  switch (v.kind) {
    case Kind::Int: return std::to_string(v.integer);
    case Kind::String: return quote_excerpt(v.text);  // escapes control characters: one line
    case Kind::Bool: return v.boolean ? "True" : "False";
    default: return "a " + std::string(pickle::Value::kind_name(v.kind));
  }
}

std::uint32_t EntryReader::add_name(std::string name) {
  if (name.empty()) return 0;
  if (!memory_.fits_append(names_) || !memory_.add(kNameBytes + 3 * memory_cost::text(name.size())) ||
      names_.size() >= std::numeric_limits<std::uint32_t>::max()) {
    throw Error(fmt::format("{}: frames: {}", path_, memory_.problem()));
  }
  names_.push_back(std::move(name));
  return static_cast<std::uint32_t>(names_.size() - 1);
}

std::uint32_t EntryReader::name_of(const FramesRef& frames) {
  if (frames.value == nullptr) return 0;
  // A list held elsewhere too (a pickle's shared frames table) is named once and kept alive
  // here, so its address cannot come back as another list's; one held only by its entry is
  // dropped with the entry while the pickle streams, and named each time.
  if (frames.shared) {
    const auto it = shared_frames_.find(frames.value);
    if (it != shared_frames_.end()) return it->second.second;
  }
  const std::uint32_t id = add_name(name_from_frames(frames.value));
  if (frames.shared) {
    if (!memory_.add(64)) throw Error(fmt::format("{}: frames: {}", path_, memory_.problem()));
    shared_frames_.emplace(frames.value, std::make_pair(frames.keep(), id));
  }
  return id;
}

std::uint32_t EntryReader::name_of(const pickle::ValuePtr* frames) {
  if (frames == nullptr) return 0;
  return name_of(FramesRef{frames->get(), frames->use_count() > 1, frames, nullptr});
}

Entry EntryReader::read(const pickle::Value& e, std::string_view base, std::size_t index) {
  if (e.kind != Kind::Dict) {
    throw Error(fmt::format("{}: {}[{}]: expected a dict (got {})", path_, base, index, describe(e)));
  }
  const EntryFields f = fields_of(e);
  Entry en = parse(f, base, index);
  name(en, f);
  return en;
}

void EntryReader::name(Entry& en, const EntryFields& f) {
  if (en.action == Action::Alloc || en.action == Action::Oom) {
    en.name = name_of(f.frames);
  } else if (en.action == Action::Annotate) {
    if (const pickle::Value* m = f.user_metadata; m != nullptr && m->kind == Kind::String) {
      en.name = add_name(to_utf8(m->text));
    }
  }
}

Entry EntryReader::parse(const EntryFields& f, std::string_view base, std::size_t index) const {
  auto fail = [&](std::string_view field, const std::string& problem) {
    throw Error(fmt::format("{}: {}[{}]{}{}: {}", path_, base, index, field.empty() ? "" : ".", field, problem));
  };
  auto field = [&](const pickle::Value* v, std::string_view name) -> const pickle::Value& {
    if (v == nullptr) fail("", fmt::format("missing field '{}'", name));
    return *v;
  };
  auto uint = [&](const pickle::Value& v, std::string_view name) {
    if (v.kind != Kind::Int || v.integer < 0)
      fail(name, fmt::format("expected a non-negative int (got {})", describe(v)));
    return static_cast<std::uint64_t>(v.integer);
  };
  Entry en;
  en.index = static_cast<std::uint32_t>(index);  // keep() refuses an index past 2^32 - 1
  const pickle::Value& action = field(f.action, "action");
  if (action.kind != Kind::String) fail("action", fmt::format("expected a str (got {})", describe(action)));
  bool known = false;
  for (const auto& [name, a] : kActionNames) {
    if (name == action.text) {
      en.action = a;
      known = true;
      break;
    }
  }
  if (!known) {
    fail("action", fmt::format("unknown action {} (known: alloc, free_requested, free_completed, segment_alloc, "
                               "segment_free, segment_map, segment_unmap, snapshot, oom, annotate)",
                               quote_excerpt(action.text)));
  }
  if (en.action == Action::Oom) {
    // An oom has no address: Entry keeps its device_free there.
    if (f.device_free != nullptr) en.addr = uint(*f.device_free, "device_free");
  } else if (en.action != Action::Snapshot && en.action != Action::Annotate) {
    en.addr = uint(field(f.addr, "addr"), "addr");
  }
  const bool needs_size = en.action != Action::Snapshot && en.action != Action::Annotate && en.action != Action::Oom;
  if (f.size != nullptr) {
    en.size = uint(*f.size, "size");
    // An oom entry's size is the failed request, which may be any number.
    if (needs_size && en.size > kMaxBytes) fail("size", fmt::format("{} bytes is more than 2^53", en.size));
  }
  if (needs_size && en.size == 0) fail("size", fmt::format("missing or 0 for a '{}' entry", action_name(en.action)));
  if (needs_size && en.addr > ~std::uint64_t{0} - en.size) fail("", "extends past the end of the 64-bit address space");
  if (f.stream != nullptr) en.stream = uint(*f.stream, "stream");
  if (const pickle::Value* t = f.time_us; t != nullptr) {
    // time_us is CPU wall-clock time in microseconds; int in every known version.
    if (t->kind != Kind::Int || t->integer < 0 || t->integer > kMaxTimeUs) {
      fail("time_us", fmt::format("expected a non-negative int of at most {} (got {})", kMaxTimeUs, describe(*t)));
    }
    en.time_us = t->integer;
  }
  return en;
}

void EntryReader::keep(Entries& entries, Entry en, std::string_view base, std::size_t index) {
  if (entries.size() >= std::numeric_limits<std::uint32_t>::max()) {
    throw Error(fmt::format("{}: {}[{}]: more than 2^32 - 1 entries; refusing", path_, base, index));
  }
  if (!memory_.add(kEntryBytes)) {
    throw Error(fmt::format("{}: {}[{}]: {}", path_, base, index, memory_.problem()));
  }
  entries.push_back(std::move(en));
}

EntrySink::Taken& EntrySink::taken_of(const pickle::ValuePtr& list) {
  if (list.get() != last_list_) {
    last_ = &lists_[list.get()];  // a node: stays where it is while others are added
    last_list_ = list.get();
    if (!last_->list) last_->list = list;
  }
  return *last_;
}

bool EntrySink::take(const pickle::ValuePtr& list, const pickle::Value& item) {
  // Only what looks like a trace entry; anything else stays in the tree.
  if (item.kind != pickle::Value::Kind::Dict || item.get("action") == nullptr) return false;
  Taken& t = taken_of(list);
  try {
    reader_.keep(t.entries, reader_.read(item, "?", t.entries.size()), "?", t.entries.size());
  } catch (const Error&) {
    // Refused here, where its key is not known yet: it stays in the tree and is read again, and
    // refused with its key, if it turns out to be an entry of the device imported.
    return false;
  }
  return true;
}

bool EntrySink::take_flat(const pickle::ValuePtr& list, std::span<const pickle::FlatValue> items,
                          std::span<const std::uint8_t> sizes) {
  // All or none, as take() would decide each: every dict must be an entry that reads without
  // error; only then are they named and kept (naming changes the reader's tables).
  const auto it = lists_.find(list.get());
  const std::size_t first = it == lists_.end() ? 0 : it->second.entries.size();
  batch_.clear();
  // The field of each key object met in this batch (the same few memo strings throughout; none
  // is freed before the batch is done, so an address stands for one key).
  std::array<std::pair<const pickle::Value*, Field>, 16> known{};
  std::size_t n_known = 0;
  auto field_of_key = [&](const pickle::Value* key) {
    for (std::size_t i = 0; i < n_known; ++i) {
      if (known[i].first == key) return known[i].second;
    }
    const Field named = field_named(key->text);
    if (n_known < known.size()) known[n_known++] = {key, named};
    return named;
  };
  std::size_t at = 0;
  for (const std::uint8_t pairs : sizes) {
    EntryFields f;
    bool has_action = false;
    for (std::size_t p = 0; p < pairs; ++p, at += 2) {
      const pickle::FlatValue& value = items[at + 1];
      const Field named = field_of_key(items[at].ref->get());
      has_action = has_action || named == Field::Action;
      const pickle::Value** field = slot_of(f, named);
      if (value.ref != nullptr) {
        if (named == Field::Frames) f.frames = {value.ref->get(), true, nullptr, value.ref};  // the memo holds it too
        if (field != nullptr) *field = value.ref->get();
        continue;
      }
      // An immediate is no list (no frames, no name) and no str (no user_metadata).
      if (field == nullptr || field == &f.user_metadata) continue;
      pickle::Value& v = immediates_[p];
      v.kind = value.kind;
      v.integer = value.integer;
      v.boolean = value.boolean;
      *field = &v;
    }
    if (!has_action) return false;
    try {
      batch_.emplace_back(reader_.parse(f, "?", first + batch_.size()), f);
    } catch (const Error&) {
      return false;  // take() refuses it: the dicts go the general way
    }
  }
  Taken& t = taken_of(list);
  for (auto& [en, f] : batch_) {
    reader_.name(en, f);
    reader_.keep(t.entries, en, "?", t.entries.size());
  }
  return true;
}

Entries* EntrySink::entries_of(const pickle::Value* list) {
  const auto it = lists_.find(list);
  return it == lists_.end() ? nullptr : &it->second.entries;
}

bool EntrySink::only_in(const pickle::Value& device_traces) const {
  for (const auto& [list, t] : lists_) {
    long in_traces = 0;
    for (const auto& item : device_traces.items) in_traces += item.get() == list ? 1 : 0;
    // Held by this sink and by device_traces, nowhere else.
    if (t.list.use_count() != 1 + in_traces || in_traces == 0) return false;
  }
  return true;
}

}  // namespace coopsim::torch_snapshot::detail
