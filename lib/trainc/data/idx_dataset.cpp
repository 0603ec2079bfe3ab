// idx: MNIST-format files (images: magic 0x00000803, labels: 0x00000801), gzip'd or raw.
// Images are scaled to [0, 1] and normalized to mean 0.5, std 0.5; samples are [1, rows, cols].
#include <zlib.h>

#include <torch/torch.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "trainc/common/error.h"
#include "trainc/data/dataset.h"

namespace trainc {
namespace {

constexpr uint32_t kImagesMagic = 0x00000803;
constexpr uint32_t kLabelsMagic = 0x00000801;

class GzipReader {
 public:
  explicit GzipReader(std::string path) : path_(std::move(path)), file_(gzopen(path_.c_str(), "rb")) {
    if (file_ == nullptr) throw UserError(path_ + ": cannot open the IDX file (does it exist?)");
  }
  ~GzipReader() { gzclose(file_); }
  GzipReader(const GzipReader&) = delete;
  GzipReader& operator=(const GzipReader&) = delete;

  // Reads exactly `size` bytes or throws, naming `what` and how much was missing. The buffer grows
  // as the bytes arrive, so a header that promises more than the file holds (a damaged count)
  // ends in that message rather than in allocating what the header claims.
  std::vector<uint8_t> read(std::size_t size, const std::string& what) {
    std::vector<uint8_t> bytes;
    while (bytes.size() < size) {
      const std::size_t done = bytes.size();
      const std::size_t chunk = std::min<std::size_t>(size - done, 1u << 26);
      bytes.resize(done + chunk);
      const int got = gzread(file_, bytes.data() + done, static_cast<unsigned>(chunk));
      if (got < 0) throw UserError(path_ + ": corrupt gzip data while reading " + what);
      bytes.resize(done + static_cast<std::size_t>(got));
      if (got == 0) {
        throw UserError(path_ + ": truncated: " + what + " needs " + std::to_string(size) + " bytes, the file has " +
                        std::to_string(done));
      }
    }
    return bytes;
  }
  // Bytes past what the header announces would be dropped without a word: a damaged count, or
  // another file appended to a raw one (zlib itself passes over what follows a gzip stream).
  void expect_end(const std::string& what) {
    uint8_t byte = 0;
    const int got = gzread(file_, &byte, 1);
    if (got < 0) throw UserError(path_ + ": corrupt gzip data after " + what);
    if (got > 0) throw UserError(path_ + ": holds more bytes than its header announces (" + what + "); a damaged count?");
  }
  uint32_t read_big_endian(const std::string& what) {
    const std::vector<uint8_t> bytes = read(4, what);
    return (uint32_t{bytes[0]} << 24) | (uint32_t{bytes[1]} << 16) | (uint32_t{bytes[2]} << 8) | uint32_t{bytes[3]};
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  gzFile file_;
};

void expect_magic(GzipReader& reader, uint32_t expected, const std::string& kind) {
  const uint32_t magic = reader.read_big_endian("the header");
  if (magic != expected) {
    char text[64];
    std::snprintf(text, sizeof(text), "0x%08x, expected 0x%08x", magic, expected);
    throw UserError(reader.path() + ": not an IDX " + kind + " file: magic number " + text);
  }
}

torch::Tensor read_images(const std::string& path) {
  GzipReader reader(path);
  expect_magic(reader, kImagesMagic, "images");
  const int64_t count = reader.read_big_endian("the image count");
  const int64_t rows = reader.read_big_endian("the row count");
  const int64_t cols = reader.read_big_endian("the column count");
  const int64_t side_limit = int64_t{1} << 20;  // keeps rows * cols from overflowing below
  if (rows == 0 || cols == 0 || rows > side_limit || cols > side_limit || rows * cols > (int64_t{1} << 40) / std::max<int64_t>(count, 1)) {
    throw UserError(path + ": the header gives " + std::to_string(count) + " images of " + std::to_string(rows) + "x" + std::to_string(cols) +
                    " pixels; expected sides of 1 to 2^20 pixels and at most 2^40 bytes in all (a damaged header?)");
  }
  const std::string announced = std::to_string(count) + " images of " + std::to_string(rows) + "x" + std::to_string(cols);
  std::vector<uint8_t> bytes = reader.read(static_cast<std::size_t>(count * rows * cols), announced);
  reader.expect_end(announced);
  const torch::Tensor pixels = torch::from_blob(bytes.data(), {count, 1, rows, cols}, torch::kUInt8);
  return (pixels.to(torch::kFloat) / 255.0 - 0.5) / 0.5;
}

torch::Tensor read_labels(const std::string& path, int64_t num_classes) {
  GzipReader reader(path);
  expect_magic(reader, kLabelsMagic, "labels");
  const int64_t count = reader.read_big_endian("the label count");
  std::vector<uint8_t> bytes = reader.read(static_cast<std::size_t>(count), std::to_string(count) + " labels");
  reader.expect_end(std::to_string(count) + " labels");
  const torch::Tensor labels = torch::from_blob(bytes.data(), {count}, torch::kUInt8).to(torch::kLong);
  if (count > 0) {
    const int64_t largest = labels.max().item<int64_t>();
    if (largest >= num_classes) {
      const int64_t at = labels.argmax().item<int64_t>();
      throw UserError(path + ": label " + std::to_string(largest) + " at index " + std::to_string(at) +
                      " is not below model.num_classes (" + std::to_string(num_classes) + ")");
    }
  }
  return labels;
}

std::pair<torch::Tensor, torch::Tensor> read_pair(const std::string& images_path, const std::string& labels_path,
                                                   int64_t num_classes) {
  torch::Tensor images = read_images(images_path);
  torch::Tensor labels = read_labels(labels_path, num_classes);
  if (images.size(0) != labels.size(0)) {
    throw UserError(labels_path + ": " + std::to_string(labels.size(0)) + " labels for " + std::to_string(images.size(0)) +
                    " images in " + images_path);
  }
  return {images, labels};
}

}  // namespace

DataSplits load_idx_data(const DataConfig& data, const ModelConfig& model) {
  DataSplits splits;
  auto [images, labels] = read_pair(*data.train_path, *data.train_labels_path, model.num_classes);
  if (data.eval_path) {
    auto [eval_images, eval_labels] = read_pair(*data.eval_path, *data.eval_labels_path, model.num_classes);
    if (eval_images.sizes().slice(1) != images.sizes().slice(1)) {
      throw UserError(*data.eval_path + ": images of " + std::to_string(eval_images.size(2)) + "x" + std::to_string(eval_images.size(3)) +
                      " pixels, but the training images (" + *data.train_path + ") are " + std::to_string(images.size(2)) + "x" +
                      std::to_string(images.size(3)));
    }
    splits.train = std::make_unique<TensorDataset>(images, labels);
    splits.eval = std::make_unique<TensorDataset>(eval_images, eval_labels);
  } else {
    split_tail(splits, images, labels, data.validation_split);
  }
  splits.sample_shape = {images.size(1), images.size(2), images.size(3)};
  splits.description = "idx " + *data.train_path + " (" + std::to_string(splits.train->size()) + " train, " +
                       std::to_string(splits.eval ? splits.eval->size() : 0) + " held out)";
  return splits;
}

}  // namespace trainc
