"""coopsim's CSV files as typed pandas DataFrames (coopsim.run, coopsim.sweep).

Integer columns (bytes, nanoseconds, counts, event indices) are pandas' nullable integers, so a
missing value is <NA> and never turns the column into floats: `oom_event` is Int64 with <NA> where the
run did not run out of memory. Byte columns whose values pass 2^63 - 1 (coopsim saturates sums at
2^64 - 1) are UInt64. The ratio and overhead columns are floats; text stays text.

Beside coopsim's own columns, the names a PyTorch user knows (torch.cuda.max_memory_allocated(),
max_memory_reserved(), memory_stats()["num_alloc_retries"] and ["num_ooms"]):

  max_memory_allocated   = peak_allocated_bytes
  max_memory_reserved    = peak_reserved_bytes
  num_alloc_retries      = alloc_retries
  num_ooms               = 1 when the run ended out of memory, else 0 (a run stops at its first)
"""
import re

# Columns that hold fractions, whatever their values look like (a ratio of 1 is written "1").
FLOAT_COLUMNS = {"budget_ratio", "reserved_fragmentation", "coop_fragmentation", "compute_overhead",
                 "recompute_overhead", "memory_ratio_of_peak", "memory_ratio_of_sweep_max", "max_overhead",
                 "ratio_of_peak"}
TEXT_COLUMNS = {"variant", "trace", "model", "trace_hash", "allocator", "policy", "status", "failing_status"}
PYTORCH_COLUMNS = [("max_memory_allocated", "peak_allocated_bytes"), ("max_memory_reserved", "peak_reserved_bytes"),
                   ("num_alloc_retries", "alloc_retries")]
_INT = re.compile(r"-?[0-9]+")
_INT64_MAX = 2**63 - 1


def _column(pandas, name, text):
    """One column from its CSV text ('' = missing)."""
    present = text[text != ""]
    if name in TEXT_COLUMNS:
        return text.replace("", None).astype("string")
    if not len(present):  # nothing recorded in any row: a count, bytes or time
        return pandas.array([None] * len(text), dtype="Float64" if name in FLOAT_COLUMNS else "Int64")
    if name in FLOAT_COLUMNS:
        return pandas.to_numeric(text.replace("", None), errors="coerce").astype("Float64")
    if len(present) and all(_INT.fullmatch(v) for v in present):
        values = [int(v) for v in present]
        dtype = "UInt64" if max(values) > _INT64_MAX and min(values) >= 0 else "Int64"
        return pandas.array([int(v) if v != "" else None for v in text], dtype=dtype)
    numbers = pandas.to_numeric(present, errors="coerce")
    if len(present) and not numbers.isna().any():
        return pandas.to_numeric(text.replace("", None), errors="coerce").astype("Float64")
    return text.replace("", None).astype("string")


def read_csv(path):
    """A coopsim CSV (run --csv, a sweep's results.csv or minbudget.csv) as a typed DataFrame, with the
    PyTorch-named columns after the columns they repeat."""
    import pandas
    raw = pandas.read_csv(path, dtype=str, keep_default_na=False)
    df = pandas.DataFrame({name: _column(pandas, name, raw[name]) for name in raw.columns})
    for new, source in PYTORCH_COLUMNS:
        if source in df.columns:
            df.insert(df.columns.get_loc(source) + 1, new, df[source])
    if "status" in df.columns and "oom_event" in df.columns:
        at = df.columns.get_loc("num_alloc_retries") + 1 if "num_alloc_retries" in df.columns else len(df.columns)
        df.insert(at, "num_ooms", (df["status"] == "oom").astype("Int64"))
    return df
