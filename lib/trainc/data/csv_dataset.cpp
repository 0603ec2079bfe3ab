// csv: a header row naming the columns, then one sample per row: numeric feature columns and an
// integer class id in data.label_column.
#include <torch/torch.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "trainc/common/error.h"
#include "trainc/config/fields.h"
#include "trainc/data/dataset.h"

namespace trainc {
namespace {

// A cell or column name as a message shows it: bytes that are not printable ASCII as \xNN, and
// at most 40 characters, so that a binary file given as CSV does not write itself to the terminal.
std::string shown(const std::string& text) {
  std::string out;
  for (const char c : text) {
    if (out.size() >= 40) return out + "...";
    if (c >= 0x20 && c < 0x7f) {
      out += c;
    } else {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", static_cast<unsigned char>(c));
      out += escaped;
    }
  }
  return out;
}

std::vector<std::string> split_row(const std::string& line) {
  std::vector<std::string> cells;
  std::stringstream stream(line);
  for (std::string cell; std::getline(stream, cell, ',');) {
    const auto first = cell.find_first_not_of(" \t\r");
    const auto last = cell.find_last_not_of(" \t\r");
    cells.push_back(first == std::string::npos ? "" : cell.substr(first, last - first + 1));
  }
  if (!line.empty() && line.back() == ',') cells.emplace_back();
  return cells;
}

struct CsvTable {
  torch::Tensor features;  // float [rows, columns - 1]
  torch::Tensor labels;    // int64 [rows]
};

CsvTable read_csv(const std::string& path, const std::string& label_column, int64_t num_classes) {
  std::ifstream file(path);
  if (!file) throw UserError(path + ": cannot open the CSV file (does it exist?)");
  std::string line;
  if (!std::getline(file, line)) throw UserError(path + ": empty file, expected a header row naming the columns");
  const std::vector<std::string> header = split_row(line);
  const auto label_it = std::find(header.begin(), header.end(), label_column);
  if (label_it == header.end()) {
    throw UserError(path + ": no column named '" + label_column + "' (data.label_column); the header has: " + shown(join(header, ", ")));
  }
  const auto label_index = static_cast<std::size_t>(label_it - header.begin());
  // A second column of the label's name would be read as a feature: the labels leaking into the inputs.
  if (std::find(label_it + 1, header.end(), label_column) != header.end()) {
    throw UserError(path + ": the header names the label column '" + shown(label_column) + "' (data.label_column) twice; expected it once");
  }
  std::vector<float> features;
  std::vector<int64_t> labels;
  for (int64_t line_number = 2; std::getline(file, line); ++line_number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::vector<std::string> cells = split_row(line);
    const std::string where = path + ":" + std::to_string(line_number);
    if (cells.size() != header.size()) {
      throw UserError(where + ": " + std::to_string(cells.size()) + " cells, expected " + std::to_string(header.size()) +
                      " (one per header column)");
    }
    for (std::size_t column = 0; column < cells.size(); ++column) {
      const std::string& cell = cells[column];
      char* end = nullptr;
      const double value = cell.empty() ? 0.0 : std::strtod(cell.c_str(), &end);
      if (cell.empty() || end != cell.c_str() + cell.size()) {
        throw UserError(where + ": column '" + shown(header[column]) + "': got \"" + shown(cell) + "\", expected a number");
      }
      if (column != label_index) {
        // nan, inf and values beyond float32's range would only show up later as a non-finite loss.
        if (!std::isfinite(static_cast<float>(value))) {
          throw UserError(where + ": column '" + shown(header[column]) + "': got \"" + shown(cell) + "\", expected a finite number within float32's range");
        }
        features.push_back(static_cast<float>(value));
      } else if (value != std::floor(value) || value < 0 || value >= static_cast<double>(num_classes)) {
        throw UserError(where + ": column '" + shown(header[column]) + "': got " + shown(cell) + ", expected a class id in [0, " +
                        std::to_string(num_classes) + ") (model.num_classes)");
      } else {
        labels.push_back(static_cast<int64_t>(value));
      }
    }
  }
  if (labels.empty()) throw UserError(path + ": no data rows after the header");
  const auto rows = static_cast<int64_t>(labels.size());
  return {torch::tensor(features).view({rows, static_cast<int64_t>(header.size()) - 1}), torch::tensor(labels, torch::kLong)};
}

}  // namespace

DataSplits load_csv_data(const DataConfig& data, const ModelConfig& model) {
  DataSplits splits;
  CsvTable train = read_csv(*data.train_path, data.label_column, model.num_classes);
  if (data.eval_path) {
    CsvTable eval = read_csv(*data.eval_path, data.label_column, model.num_classes);
    if (eval.features.size(1) != train.features.size(1)) {
      throw UserError(*data.eval_path + ": " + std::to_string(eval.features.size(1)) + " feature columns, but " +
                      *data.train_path + " has " + std::to_string(train.features.size(1)));
    }
    splits.train = std::make_unique<TensorDataset>(train.features, train.labels);
    splits.eval = std::make_unique<TensorDataset>(eval.features, eval.labels);
  } else {
    split_tail(splits, train.features, train.labels, data.validation_split);
  }
  splits.sample_shape = {train.features.size(1)};
  splits.description = "csv " + *data.train_path + " (" + std::to_string(train.labels.size(0)) + " rows)";
  return splits;
}

}  // namespace trainc
