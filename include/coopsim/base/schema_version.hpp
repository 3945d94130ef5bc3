#pragma once
// The "schema_version" of each JSON result document coopsim writes, all in one place (listed in
// docs/architecture.md, "JSON documents"). A document's number goes up when one of its keys is
// removed or renamed or changes meaning; a new key leaves it as it is, so readers skip keys they
// do not know and refuse a number they do not know.
namespace coopsim::schema_version {

inline constexpr int kReport = 1;         // run --json / -o: one report, or an array of them
inline constexpr int kSweepResults = 1;   // sweep / merge: results.json
inline constexpr int kSweepManifest = 1;  // sweep / merge: sweep.json
inline constexpr int kMinBudget = 1;      // minbudget --json
inline constexpr int kAdvice = 1;         // advise --json
inline constexpr int kListing = 1;        // list --json
inline constexpr int kSnapshotDiff = 1;   // snapshot diff --json / -o

}  // namespace coopsim::schema_version
