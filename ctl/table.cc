#include "ctl/table.h"

#include <algorithm>
#include <utility>

#include "common/check.h"

namespace kolo::ctl {

Table::Table(std::vector<Column> columns) : columns_(std::move(columns)) {}

void Table::AddRow(std::vector<std::string> cells) {
  KOLO_CHECK(cells.size() == columns_.size())
      << "a row of " << cells.size() << " cells in a table of "
      << columns_.size() << " columns";
  rows_.push_back(std::move(cells));
}

std::string Table::Render(const std::string& indent) const {
  std::vector<size_t> width(columns_.size());
  for (size_t c = 0; c < columns_.size(); ++c) {
    width[c] = columns_[c].header.size();
    for (const auto& row : rows_) width[c] = std::max(width[c], row[c].size());
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string out = indent;
    for (size_t c = 0; c < cells.size(); ++c) {
      if (c > 0) out += "  ";
      std::string pad(width[c] - cells[c].size(), ' ');
      if (columns_[c].align == Align::kRight) {
        out += pad + cells[c];
      } else {
        out += cells[c] + pad;
      }
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out + "\n";
  };
  std::vector<std::string> headers;
  for (const Column& col : columns_) headers.push_back(col.header);
  std::string out = line(headers);
  for (const auto& row : rows_) out += line(row);
  return out;
}

}  // namespace kolo::ctl
