// A TensorDict with one batch dim as a table, in CSV and JSON files: upstream's `to_csv` /
// `from_csv` / `to_json` / `from_json` (tensordict/tabular.py, which goes through pandas). Each
// row is a batch element, each column a leaf of shape [n] (or non-tensor data: a JSON array of
// n values, one per row, or one value repeated on every row). Nested keys are columns named by
// their parts joined with `separator`, and split back on reading.
//
//   td::to_csv(steps, "/data/steps.csv", td::TableOptions().separator("."));
//   td::TensorDict back = td::from_csv("/data/steps.csv", td::FromTableOptions().separator("."));
//   td::to_json(steps, "/data/steps.jsonl", td::TableOptions().lines(true));
// Reading infers each column's type as pandas does: every cell an integer -> int64, every cell
// True / False -> bool, every cell a number or empty -> float64 (empty and null are NaN), else
// strings: a non-tensor entry holding the JSON array of the cells. Writing: integers and bools as
// pandas writes them ("True" / "False" in CSV), floats with the fewest digits that read back
// the same value, NaN as an empty CSV cell or JSON null. Bazel: //td/io. See docs/io.md.
#pragma once

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>
#include <torch/arg.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "td/core/tensordict.h"

namespace td {

// Options of to_csv / to_json.
struct TableOptions {
  // Joins the parts of nested keys into column names; nullopt: a nested TensorDict is a
  // ValueError naming its key (upstream's rule).
  TORCH_ARG(std::optional<std::string>, separator) = std::nullopt;
  // JSON only: JSON Lines (one record per line) instead of one array of records.
  TORCH_ARG(bool, lines) = false;
};

// Options of from_csv / from_json (upstream's keyword arguments).
struct FromTableOptions {
  // Splits column names into nested keys.
  TORCH_ARG(std::optional<std::string>, separator) = std::nullopt;
  // Casts every numeric column (int64, float64, bool) to this dtype.
  TORCH_ARG(std::optional<c10::ScalarType>, dtype) = std::nullopt;
  // Default: [number of rows].
  TORCH_ARG(std::optional<std::vector<int64_t>>, batch_size) = std::nullopt;
  TORCH_ARG(bool, auto_batch_size) = false;
  TORCH_ARG(std::optional<int64_t>, batch_dims) = std::nullopt;
  TORCH_ARG(std::optional<at::Device>, device) = std::nullopt;
  // JSON only: the file is JSON Lines.
  TORCH_ARG(bool, lines) = false;
};

// Writes `td` (batch size [n]) as a CSV file: a header row of column names, then n rows.
// Throws ValueError naming the key for a leaf that is not of shape [n], a complex tensor, a
// nested TensorDict without a separator, or a TensorDict whose batch size is not one dim;
// c10::Error naming the file when it cannot be written.
void to_csv(const TensorDict& td, const std::string& path, const TableOptions& options = {});
// Reads a CSV file with a header row (RFC 4180: quoted cells may hold commas, quotes doubled,
// newlines). Throws ValueError naming the file and line for a row with another number of cells
// than the header, an unterminated quote, or a column name repeated; c10::Error when it cannot
// be read; ValueError for conflicting batch options (as from_dict).
TensorDict from_csv(const std::string& path, const FromTableOptions& options = {});

// Writes `td` as JSON records ([{"col": value, ...}, ...], or one object per line). Throws as
// to_csv.
void to_json(const TensorDict& td, const std::string& path, const TableOptions& options = {});
// Reads a JSON array of records (or JSON Lines); the columns are the keys of the records in
// order of first appearance, a record lacking one holds null there. Throws ValueError naming the
// file for malformed JSON or a top level that is not an array of objects.
TensorDict from_json(const std::string& path, const FromTableOptions& options = {});

}  // namespace td
