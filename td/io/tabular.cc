#include "td/io/tabular.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/tensor.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>

#include "absl/container/flat_hash_set.h"
#include "nlohmann/json.hpp"
#include "td/core/errors.h"
#include "td/core/internal/structure_check.h"
#include "td/io/dict.h"

namespace td {
namespace {

using json = nlohmann::json;

// One column to write: its name and, per row, a JSON value.
struct Column {
  std::string name;
  std::vector<json> cells;
};

// The columns of `td` (NOTE in tabular.h): leaves of shape [n], non-tensor data per row.
std::vector<Column> Columns(const TensorDict& td, const TableOptions& o, const char* fn) {
  if (td.batch_dims() != 1) {
    TD_FAIL(ValueError, fn, ": a table needs a TensorDict with one batch dim, got batch size ",
            td.batch_size());
  }
  const int64_t n = td.batch_size()[0];
  std::vector<Column> out;
  absl::flat_hash_set<std::string> names;
  KeysOptions leaves = KeysOptions().include_nested(true).leaves_only(true);
  for (const auto& [key, value] : td.items(leaves)) {
    if (key.is_nested() && !o.separator()) {
      TD_FAIL(ValueError, fn, ": key ", key.repr(), " is nested; pass TableOptions().separator(\".\") "
              "to name its column by its joined parts");
    }
    Column c{o.separator() ? key.join(*o.separator()) : key.front(), {}};
    if (!names.insert(c.name).second) {
      TD_FAIL(ValueError, fn, ": two keys give the column name '", c.name, "' (key ", key.repr(), ")");
    }
    c.cells.reserve(static_cast<size_t>(n));
    if (value.is_non_tensor()) {
      const json& d = value.non_tensor();
      const bool per_row = d.is_array() && static_cast<int64_t>(d.size()) == n;
      for (int64_t i = 0; i < n; ++i) c.cells.push_back(per_row ? d[static_cast<size_t>(i)] : d);
    } else {
      const at::Tensor& t = value.tensor();
      if (t.dim() != 1) {
        TD_FAIL(ValueError, fn, ": key ", key.repr(), " has shape ", t.sizes(), "; a column holds one "
                "value per row (shape [", n, "])");
      }
      if (t.is_complex()) TD_FAIL(ValueError, fn, ": key ", key.repr(), " is complex (", t.scalar_type(), ")");
      const at::Tensor cpu = t.detach().to(at::kCPU).contiguous();
      if (cpu.scalar_type() == at::kBool) {
        const at::Tensor b = cpu.to(at::kBool);
        const bool* p = b.data_ptr<bool>();
        for (int64_t i = 0; i < n; ++i) c.cells.emplace_back(p[i]);
      } else if (at::isIntegralType(cpu.scalar_type(), /*includeBool=*/false)) {
        const at::Tensor l = cpu.to(at::kLong);
        const int64_t* p = l.data_ptr<int64_t>();
        for (int64_t i = 0; i < n; ++i) c.cells.emplace_back(p[i]);
      } else {
        const at::Tensor d = cpu.to(at::kDouble);
        const double* p = d.data_ptr<double>();
        for (int64_t i = 0; i < n; ++i) c.cells.push_back(std::isnan(p[i]) ? json(nullptr) : json(p[i]));
      }
    }
    out.push_back(std::move(c));
  }
  return out;
}

// The fewest significant digits that read back as `v` (Python's repr of a float).
std::string ShortestDouble(double v) {
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[40];
  for (int p = 1; p <= 17; ++p) {
    std::snprintf(buf, sizeof(buf), "%.*g", p, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  std::string s(buf);
  // pandas writes integral floats as "1.0".
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

std::string CsvCell(const json& v) {
  std::string s;
  if (v.is_null()) return "";
  if (v.is_boolean()) return v.get<bool>() ? "True" : "False";
  if (v.is_number_integer() || v.is_number_unsigned()) return v.dump();
  if (v.is_number_float()) return ShortestDouble(v.get<double>());
  s = v.is_string() ? v.get<std::string>() : v.dump();
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char ch : s) {
    if (ch == '"') q += '"';
    q += ch;
  }
  return q + "\"";
}

void WriteText(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
  f.close();
  if (!f) TD_FAIL(c10::Error, "cannot write ", path, ": ", std::strerror(errno));
}

// The file's text, without a leading UTF-8 byte-order mark (pandas drops it too: it is not part
// of the first column's name).
std::string ReadText(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) TD_FAIL(c10::Error, "cannot read ", path, ": ", std::strerror(errno));
  std::ostringstream ss;
  ss << f.rdbuf();
  std::string text = ss.str();
  if (text.compare(0, 3, "\xEF\xBB\xBF") == 0) text.erase(0, 3);
  return text;
}

// Parses an RFC 4180 CSV text into rows of cells. A cell that was quoted is reported as such
// (so that "" quoted is the empty string, unquoted an empty cell).
struct Cell {
  std::string text;
  bool quoted = false;
};
std::vector<std::vector<Cell>> ParseCsv(const std::string& text, const std::string& path) {
  std::vector<std::vector<Cell>> rows;
  std::vector<Cell> row;
  Cell cell;
  size_t i = 0, line = 1;
  bool any = false;  // something on the current row
  while (i < text.size()) {
    const char c = text[i];
    if (c == '"' && cell.text.empty() && !cell.quoted) {
      cell.quoted = true;
      const size_t start_line = line;
      ++i;
      while (true) {
        if (i >= text.size()) {
          TD_FAIL(ValueError, "from_csv: ", path, ": the quote opened on line ", start_line, " is never closed");
        }
        if (text[i] == '"') {
          if (i + 1 < text.size() && text[i + 1] == '"') {
            cell.text += '"';
            i += 2;
            continue;
          }
          ++i;
          break;
        }
        if (text[i] == '\n') ++line;
        cell.text += text[i++];
      }
      any = true;
      continue;
    }
    if (c == ',') {
      row.push_back(std::move(cell));
      cell = Cell();
      any = true;
      ++i;
    } else if (c == '\n' || c == '\r') {
      if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
      ++i;
      if (any || !cell.text.empty()) {
        row.push_back(std::move(cell));
        rows.push_back(std::move(row));
      }
      row.clear();
      cell = Cell();
      any = false;
      ++line;
    } else {
      cell.text += c;
      any = true;
      ++i;
    }
  }
  if (any || !cell.text.empty()) {
    row.push_back(std::move(cell));
    rows.push_back(std::move(row));
  }
  return rows;
}

// What an unquoted CSV cell is to pandas' default C parser (read_csv without dtype):
//  kNa     one of its default NA strings ("", "NA", "nan", "null", ...): a missing value;
//  kInt    an integer ([+-]digits, spaces around allowed) in int64's range;
//  kUint   such an integer in [2^63, 2^64): pandas makes the column uint64;
//  kBigInt such an integer outside both ranges: pandas keeps the column as strings;
//  kFloat  a decimal number (digits, '.', an exponent) or inf / infinity (any case, signed);
//  kOther  anything else (hexadecimal "0x1A", "1_000", "1e", words): a string.
enum class CellKind { kNa, kInt, kUint, kBigInt, kFloat, kOther };

bool IsNaToken(const std::string& s) {
  static const char* const kNa[] = {"",     "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN",
                                    "-NaN", "-nan", "1.#IND",   "1.#QNAN", "<NA>", "N/A",
                                    "NA",   "NULL", "NaN",      "None", "n/a",  "nan",
                                    "null"};
  for (const char* na : kNa) {
    if (s == na) return true;
  }
  return false;
}

CellKind Classify(const std::string& s) {
  if (IsNaToken(s)) return CellKind::kNa;
  size_t b = 0, e = s.size();
  while (b < e && (s[b] == ' ' || s[b] == '\t')) ++b;
  while (e > b && (s[e - 1] == ' ' || s[e - 1] == '\t')) --e;
  const std::string t = s.substr(b, e - b);
  size_t i = t.empty() || (t[0] != '+' && t[0] != '-') ? 0 : 1;
  const size_t digits_start = i;
  while (i < t.size() && t[i] >= '0' && t[i] <= '9') ++i;
  const size_t int_digits = i - digits_start;
  if (int_digits > 0 && i == t.size()) {
    errno = 0;
    std::strtoll(t.c_str(), nullptr, 10);
    if (errno == 0) return CellKind::kInt;
    if (t[0] == '-') return CellKind::kBigInt;
    errno = 0;
    std::strtoull(t.c_str(), nullptr, 10);
    return errno == 0 ? CellKind::kUint : CellKind::kBigInt;
  }
  size_t frac_digits = 0;
  if (i < t.size() && t[i] == '.') {
    for (++i; i < t.size() && t[i] >= '0' && t[i] <= '9'; ++i) ++frac_digits;
  }
  if (int_digits + frac_digits > 0) {
    if (i < t.size() && (t[i] == 'e' || t[i] == 'E')) {
      size_t j = i + 1;
      if (j < t.size() && (t[j] == '+' || t[j] == '-')) ++j;
      const size_t exp_start = j;
      while (j < t.size() && t[j] >= '0' && t[j] <= '9') ++j;
      if (j > exp_start) i = j;
    }
    if (i == t.size()) return CellKind::kFloat;
  }
  std::string lower = t.substr(digits_start);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return lower == "inf" || lower == "infinity" ? CellKind::kFloat : CellKind::kOther;
}

// The value of a kNa (NaN), kInt or kFloat cell.
double CellDouble(const std::string& s, CellKind kind) {
  if (kind == CellKind::kNa) return std::nan("");
  std::string t = s;
  t.erase(std::remove(t.begin(), t.end(), '\t'), t.end());
  t.erase(std::remove(t.begin(), t.end(), ' '), t.end());
  return std::strtod(t.c_str(), nullptr);  // the forms Classify accepts; inf and 1e999 as +-inf
}

// Finds the first integer literal of a JSON text that int64 cannot hold, with nlohmann/json's SAX
// parser (iterative: any depth is safe). It reads 2^63 to 2^64-1 as unsigned numbers and larger
// integers as doubles whose literal has no '.', 'e' or 'E': neither is a value a column can keep
// exactly.
class WideIntegerFinder : public nlohmann::json_sax<json> {
 public:
  static std::string Find(std::string_view text) {
    WideIntegerFinder finder;
    json::sax_parse(text.begin(), text.end(), &finder);
    return finder.found_;
  }

  bool number_unsigned(number_unsigned_t v) override {
    if (v > static_cast<number_unsigned_t>(std::numeric_limits<int64_t>::max())) {
      found_ = std::to_string(v);
    }
    return found_.empty();
  }
  bool number_float(number_float_t, const string_t& literal) override {
    if (literal.find_first_of(".eE") == string_t::npos) found_ = literal;
    return found_.empty();
  }
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return true; }
  bool key(string_t&) override { return true; }
  bool end_object() override { return true; }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  // Malformed text: the depth-checked parse that follows names the error.
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return false;
  }

 private:
  std::string found_;
};

// A column of cells (JSON values) as a tensor when every cell fits one numeric type, else as
// non-tensor data: the JSON array.
Value ColumnValue(const std::vector<json>& cells, const FromTableOptions& o) {
  bool ints = true, bools = true, numbers = true;
  for (const json& c : cells) {
    ints = ints && (c.is_number_integer() || c.is_number_unsigned());
    bools = bools && c.is_boolean();
    numbers = numbers && (c.is_number() || c.is_null());
  }
  const int64_t n = static_cast<int64_t>(cells.size());
  at::Tensor t;
  if (n > 0 && ints) {
    std::vector<int64_t> v;
    for (const json& c : cells) v.push_back(c.get<int64_t>());
    t = at::tensor(v, at::kLong);
  } else if (n > 0 && bools) {
    std::vector<uint8_t> v;
    for (const json& c : cells) v.push_back(c.get<bool>() ? 1 : 0);
    t = at::tensor(v, at::kByte).to(at::kBool);
  } else if (numbers) {
    std::vector<double> v;
    for (const json& c : cells) v.push_back(c.is_null() ? std::nan("") : c.get<double>());
    t = n == 0 ? at::empty({0}, at::kDouble) : at::tensor(v, at::kDouble);
  } else {
    // One value per row (NOTE [ Non-tensor stacks ] in td/core/internal/non_tensor_stack.h).
    return Value(NonTensorData::stack(json(cells)));
  }
  if (o.dtype()) t = t.to(*o.dtype());
  return Value(t);
}

TensorDict FromColumns(const std::vector<std::string>& names, const std::vector<std::vector<json>>& cols,
                       int64_t rows, const FromTableOptions& o, const std::string& path, const char* fn) {
  std::vector<TensorDict::Item> items;
  absl::flat_hash_set<std::string> seen;
  for (size_t c = 0; c < names.size(); ++c) {
    if (!seen.insert(names[c]).second) {
      TD_FAIL(ValueError, fn, ": ", path, ": column '", names[c], "' appears twice");
    }
  }
  FromDictOptions d = FromDictOptions().device(o.device()).auto_batch_size(o.auto_batch_size())
                          .batch_dims(o.batch_dims());
  if (o.batch_size()) {
    d.batch_size(o.batch_size());
  } else if (!o.auto_batch_size() && !o.batch_dims()) {
    d.batch_size(std::vector<int64_t>{rows});
  }
  TensorDict out = from_dict(std::vector<TensorDict::Item>{}, d);
  for (size_t c = 0; c < names.size(); ++c) {
    std::vector<std::string> parts;
    if (o.separator() && !o.separator()->empty()) {
      size_t start = 0;
      while (true) {
        const size_t at = names[c].find(*o.separator(), start);
        parts.push_back(names[c].substr(start, at == std::string::npos ? std::string::npos : at - start));
        if (at == std::string::npos) break;
        start = at + o.separator()->size();
      }
    } else {
      parts.push_back(names[c]);
    }
    const NestedKey key(parts);
    if (out.contains(key)) {
      TD_FAIL(ValueError, fn, ": ", path, ": column '", names[c], "' gives the key ", key.repr(),
              " twice or under another column's value");
    }
    out.set(key, ColumnValue(cols[c], o));
  }
  if (o.auto_batch_size() || o.batch_dims()) out.auto_batch_size_(o.batch_dims());
  return out;
}

void CheckBatchOptions(const FromTableOptions& o, const char* fn) {
  if (o.batch_size() && (o.auto_batch_size() || o.batch_dims())) {
    TD_FAIL(ValueError, fn, ": batch_size cannot be combined with ",
            o.batch_dims() ? "batch_dims" : "auto_batch_size");
  }
}

}  // namespace

void to_csv(const TensorDict& td, const std::string& path, const TableOptions& options) {
  const std::vector<Column> cols = Columns(td, options, "to_csv");
  std::string out;
  for (size_t c = 0; c < cols.size(); ++c) out += (c ? "," : "") + CsvCell(json(cols[c].name));
  out += "\n";
  const int64_t n = td.batch_size()[0];
  for (int64_t i = 0; i < n; ++i) {
    for (size_t c = 0; c < cols.size(); ++c) {
      out += (c ? "," : "") + CsvCell(cols[c].cells[static_cast<size_t>(i)]);
    }
    out += "\n";
  }
  WriteText(path, out);
}

TensorDict from_csv(const std::string& path, const FromTableOptions& options) {
  CheckBatchOptions(options, "from_csv");
  const std::vector<std::vector<Cell>> rows = ParseCsv(ReadText(path), path);
  if (rows.empty()) TD_FAIL(ValueError, "from_csv: ", path, " has no header row");
  std::vector<std::string> names;
  for (const Cell& c : rows[0]) names.push_back(c.text);
  std::vector<std::vector<json>> cols(names.size());
  for (size_t r = 1; r < rows.size(); ++r) {
    if (rows[r].size() != names.size()) {
      TD_FAIL(ValueError, "from_csv: ", path, ": row ", r + 1, " has ", rows[r].size(),
              " cells, the header ", names.size());
    }
  }
  auto is_true = [](const std::string& s) { return s == "True" || s == "TRUE" || s == "true"; };
  auto is_false = [](const std::string& s) { return s == "False" || s == "FALSE" || s == "false"; };
  for (size_t c = 0; c < names.size(); ++c) {
    // pandas' order: int64, then uint64 (refused: no LibTorch dtype) or, for integers neither
    // holds, strings; bool; float64; strings.
    bool ints = true, bools = true, numbers = true, wide = false, negative = false;
    size_t first_uint = 0;
    std::vector<CellKind> kinds;
    for (size_t r = 1; r < rows.size(); ++r) {
      const Cell& cell = rows[r][c];
      const CellKind k = cell.quoted ? CellKind::kOther : Classify(cell.text);
      kinds.push_back(k);
      const bool integer = k == CellKind::kInt || k == CellKind::kUint || k == CellKind::kBigInt;
      ints = ints && integer;
      if (k == CellKind::kUint && first_uint == 0) first_uint = r;
      wide = wide || k == CellKind::kBigInt;
      negative = negative || (integer && cell.text.find('-') != std::string::npos);
      bools = bools && !cell.quoted && (is_true(cell.text) || is_false(cell.text));
      numbers = numbers && (k == CellKind::kNa || k == CellKind::kInt || k == CellKind::kFloat);
    }
    if (ints && first_uint > 0 && !wide && !negative) {
      TD_FAIL(ValueError, "from_csv: ", path, ": column '", names[c], "' holds integers up to 2^64-1 (",
              rows[first_uint][c].text, " on row ", first_uint + 1, "), which pandas reads as uint64; "
              "LibTorch has no uint64 dtype and int64 cannot hold them");
    }
    const bool as_ints = ints && first_uint == 0 && !wide;
    for (size_t r = 1; r < rows.size(); ++r) {
      const std::string& s = rows[r][c].text;
      if (as_ints) {
        cols[c].emplace_back(static_cast<int64_t>(std::strtoll(s.c_str(), nullptr, 10)));
      } else if (ints) {
        cols[c].emplace_back(s);  // integers past int64 and uint64 (or both signs): pandas' strings
      } else if (bools) {
        cols[c].emplace_back(is_true(s));
      } else if (numbers) {
        const double v = CellDouble(s, kinds[r - 1]);
        cols[c].push_back(std::isnan(v) ? json(nullptr) : json(v));
      } else {
        cols[c].emplace_back(s);
      }
    }
  }
  return FromColumns(names, cols, static_cast<int64_t>(rows.size()) - 1, options, path, "from_csv");
}

void to_json(const TensorDict& td, const std::string& path, const TableOptions& options) {
  const std::vector<Column> cols = Columns(td, options, "to_json");
  const int64_t n = td.batch_size()[0];
  std::string out = options.lines() ? "" : "[";
  for (int64_t i = 0; i < n; ++i) {
    // Columns in order (a json object would sort them).
    std::string text = "{";
    for (size_t c = 0; c < cols.size(); ++c) {
      text += (c ? "," : "") + json(cols[c].name).dump() + ":" + cols[c].cells[static_cast<size_t>(i)].dump();
    }
    text += "}";
    if (options.lines()) {
      out += text + "\n";
    } else {
      out += (i ? "," : "") + text;
    }
  }
  if (!options.lines()) out += "]";
  WriteText(path, out);
}

TensorDict from_json(const std::string& path, const FromTableOptions& options) {
  CheckBatchOptions(options, "from_json");
  const std::string text = ReadText(path);
  // Parsed keeping each record's key order (the columns' order), through the one depth-checked
  // parse (NOTE [ Untrusted JSON ] in td/core/internal/structure_check.h).
  auto parse = [&](std::string_view t, const std::string& where) {
    absl::StatusOr<nlohmann::ordered_json> j = internal::ParseUntrustedJson<nlohmann::ordered_json>(t);
    if (!j.ok()) TD_FAIL(ValueError, "from_json: ", path, where, ": ", j.status().message());
    if (const std::string wide = WideIntegerFinder::Find(t); !wide.empty()) {
      TD_FAIL(ValueError, "from_json: ", path, where, ": the integer ", wide,
              " does not fit int64 (LibTorch has no uint64 dtype); a column cannot hold it exactly");
    }
    return *std::move(j);
  };
  std::vector<nlohmann::ordered_json> records;
  if (options.lines()) {
    std::istringstream in(text);
    std::string line;
    for (size_t n = 1; std::getline(in, line); ++n) {
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      records.push_back(parse(line, " line " + std::to_string(n)));
    }
  } else {
    nlohmann::ordered_json all = parse(text, "");
    if (!all.is_array()) {
      TD_FAIL(ValueError, "from_json: ", path, " must hold an array of records (objects); got a ",
              all.type_name(), " (for one nested object, use from_dict)");
    }
    for (auto& r : all) records.push_back(std::move(r));
  }
  std::vector<std::string> names;
  absl::flat_hash_set<std::string> seen;
  for (size_t r = 0; r < records.size(); ++r) {
    if (!records[r].is_object()) {
      TD_FAIL(ValueError, "from_json: ", path, ": record ", r, " is a ", records[r].type_name(),
              ", expected an object");
    }
    for (const auto& [k, v] : records[r].items()) {
      if (seen.insert(k).second) names.push_back(k);
    }
  }
  std::vector<std::vector<json>> cols(names.size());
  for (size_t c = 0; c < names.size(); ++c) {
    for (const auto& r : records) {
      auto it = r.find(names[c]);
      // ordered_json to json: our own text, through the one parse (NOTE [ Untrusted JSON ]).
      cols[c].push_back(it == r.end() ? json(nullptr)
                                      : ValueOrThrow(internal::ParseUntrustedJson<json>(it->dump())));
    }
  }
  return FromColumns(names, cols, static_cast<int64_t>(records.size()), options, path, "from_json");
}

}  // namespace td
