// Op nesting for Kineto traces: per thread, CPU ops form a tree by time containment (Chrome
// trace "X" events on one thread nest like a call stack). One sweep per thread over op starts
// and point events (memory events, runtime calls) in time order finds each op's top-level
// ancestor and the innermost op enclosing each point. Recorded microsecond rounding can make a
// child end a little after its parent; a child is therefore any op that starts before the
// op below it ends, or ends within it.
#include <algorithm>
#include <tuple>

#include "kineto_detail.hpp"

namespace coopsim::kineto_detail {
namespace {

enum class ItemKind : std::uint8_t { OpStart = 0, Memory = 1, Runtime = 2 };

struct Item {
  std::uint32_t thread;
  std::int64_t ts;
  ItemKind kind;
  std::int64_t order;  // ops: longer first (-duration); points: 0
  std::size_t tie;     // position in traceEvents / in its vector: keeps the sort deterministic
  std::uint32_t index;
};

}  // namespace

Nesting nest_ops(const Collected& c) {
  Nesting n;
  n.root.assign(c.ops.size(), kNone);
  n.memory_innermost.assign(c.memory.size(), kNone);
  n.runtime_root.assign(c.runtime.size(), kNone);
  n.parent.assign(c.ops.size(), kNone);
  n.runtime_innermost.assign(c.runtime.size(), kNone);

  std::vector<Item> items;
  items.reserve(c.ops.size() + c.memory.size() + c.runtime.size());
  for (std::uint32_t i = 0; i < c.ops.size(); ++i) {
    const OpRange& op = c.ops[i];
    items.push_back({op.thread, op.begin, ItemKind::OpStart, -(op.end - op.begin), op.index, i});
  }
  for (std::uint32_t i = 0; i < c.memory.size(); ++i) {
    items.push_back({c.memory[i].thread, c.memory[i].ts, ItemKind::Memory, 0, c.memory[i].index, i});
  }
  for (std::uint32_t i = 0; i < c.runtime.size(); ++i) {
    items.push_back({c.runtime[i].thread, c.runtime[i].ts, ItemKind::Runtime, 0, i, i});
  }
  // At equal ts an op starts before a point: allocations at an op's first microsecond are its own.
  std::sort(items.begin(), items.end(), [](const Item& a, const Item& b) {
    return std::tie(a.thread, a.ts, a.kind, a.order, a.tie) < std::tie(b.thread, b.ts, b.kind, b.order, b.tie);
  });

  std::vector<std::uint32_t> stack;  // ops open on the current thread, outermost first
  std::uint32_t thread = kNone;
  for (const Item& it : items) {
    if (it.thread != thread) {
      stack.clear();
      thread = it.thread;
    }
    if (it.kind == ItemKind::OpStart) {
      const OpRange& op = c.ops[it.index];
      while (!stack.empty()) {
        const OpRange& top = c.ops[stack.back()];
        if (op.begin < top.end || op.end <= top.end) break;
        stack.pop_back();
      }
      n.root[it.index] = stack.empty() ? it.index : n.root[stack.front()];
      if (!stack.empty()) n.parent[it.index] = stack.back();
      stack.push_back(it.index);
      continue;
    }
    while (!stack.empty() && c.ops[stack.back()].end < it.ts) stack.pop_back();
    if (stack.empty()) continue;
    if (it.kind == ItemKind::Memory) {
      n.memory_innermost[it.index] = stack.back();
    } else {
      n.runtime_root[it.index] = n.root[stack.back()];
      n.runtime_innermost[it.index] = stack.back();
    }
  }
  return n;
}

}  // namespace coopsim::kineto_detail
