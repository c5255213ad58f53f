// A plain text table for kolo-ctl's human output: a header row and data rows,
// each column as wide as its widest cell, columns two spaces apart, numbers
// right-aligned. Trailing spaces are trimmed, so that lines compare exactly
// in tests.
//
// Thread-safety: a Table is a value; not shared between threads.
#ifndef KOLO_CTL_TABLE_H_
#define KOLO_CTL_TABLE_H_

#include <string>
#include <vector>

namespace kolo::ctl {

class Table {
 public:
  enum class Align { kLeft, kRight };
  struct Column {
    std::string header;
    Align align = Align::kLeft;
  };

  explicit Table(std::vector<Column> columns);

  // REQUIRES: cells.size() == the number of columns.
  void AddRow(std::vector<std::string> cells);

  // The header line and one line per row, each ending in '\n', every line
  // prefixed with `indent`.
  std::string Render(const std::string& indent = "") const;

 private:
  std::vector<Column> columns_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace kolo::ctl

#endif  // KOLO_CTL_TABLE_H_
