// Bad data files: each a clear error (exit 2) naming the file and where it is wrong.
#include <catch2/catch.hpp>

#include <cstring>
#include <fstream>

#include "support/command.h"
#include "support/data_files.h"

using namespace trainc::test;
using Catch::Matchers::Contains;

namespace {
CommandResult train(const ScratchDir& dir, const std::string& yaml) {
  const std::string config = dir.write("run.yaml", "max_steps: 2\neval_strategy: no\noverwrite_output_dir: true\noutput_dir: " +
                                                   dir.file("out") + "\n" + yaml);
  return run_trainc("--config " + config);
}
CommandResult train_idx(const ScratchDir& dir) {
  return train(dir, "data: {kind: idx, train_path: " + dir.file("images") + ", train_labels_path: " + dir.file("labels") + "}\n");
}
const std::string kGpt = "model: {name: gpt, n_layer: 1, n_head: 2, n_embd: 16, block_size: 8, vocab_size: 100}\n";
}  // namespace

TEST_CASE("a truncated token file", "[e2e][data]") {
  ScratchDir dir;
  write_tokens(dir.file("train.bin"), 1000, 100, true);
  const std::string bytes = read_text(dir.file("train.bin"));
  std::ofstream(dir.file("train.bin"), std::ios::binary) << bytes.substr(0, bytes.size() - 100);
  const CommandResult result = train(dir, kGpt + "data: {kind: tokens, train_path: " + dir.file("train.bin") + "}\n");
  CHECK(result.exit_code == 2);
  CHECK_THAT(result.err, Contains(dir.file("train.bin") + ": truncated: the llm.c header announces 1000 tokens"));

  std::ofstream(dir.file("odd.bin"), std::ios::binary) << std::string(101, 'x');
  const CommandResult odd = train(dir, kGpt + "data: {kind: tokens, train_path: " + dir.file("odd.bin") + "}\n");
  CHECK(odd.exit_code == 2);
  CHECK_THAT(odd.err, Contains(dir.file("odd.bin") + ": 101 bytes is not a whole number of uint16 tokens"));

  // A damaged count in the header: negative, or fewer tokens than the file holds.
  for (const int32_t announced : {-5, 10}) {
    std::string header = bytes;
    std::memcpy(&header[8], &announced, sizeof(announced));  // int32 2 of 256, little-endian as llm.c writes it
    std::ofstream(dir.file("damaged.bin"), std::ios::binary) << header;
    const CommandResult damaged = train(dir, kGpt + "data: {kind: tokens, train_path: " + dir.file("damaged.bin") + "}\n");
    CHECK(damaged.exit_code == 2);
    CHECK_THAT(damaged.err, Contains(dir.file("damaged.bin") + ": the llm.c header announces " + std::to_string(announced) + " tokens"));
    CHECK_THAT(damaged.err, !Contains("truncated"));
  }
}

TEST_CASE("tokens outside the vocabulary", "[e2e][data]") {
  ScratchDir dir;
  write_tokens(dir.file("train.bin"), 1000, 300, false);
  const CommandResult result = train(dir, kGpt + "data: {kind: tokens, train_path: " + dir.file("train.bin") + "}\n");
  CHECK(result.exit_code == 2);
  CHECK_THAT(result.err, Contains("is not below model.vocab_size (100)"));
}

TEST_CASE("an IDX file with the wrong magic number", "[e2e][data]") {
  ScratchDir dir;
  write_idx_images(dir.file("images"), 10, false, 0x00000801);
  write_idx_labels(dir.file("labels"), 10, false);
  const CommandResult result = train_idx(dir);
  CHECK(result.exit_code == 2);
  CHECK_THAT(result.err, Contains(dir.file("images") + ": not an IDX images file: magic number 0x00000801, expected 0x00000803"));
}

TEST_CASE("an IDX file cut short", "[e2e][data]") {
  ScratchDir dir;
  write_idx_images(dir.file("images"), 10, false);
  const std::string bytes = read_text(dir.file("images"));
  std::ofstream(dir.file("images"), std::ios::binary) << bytes.substr(0, 2000);
  write_idx_labels(dir.file("labels"), 10, false);
  const CommandResult result = train_idx(dir);
  CHECK(result.exit_code == 2);
  CHECK_THAT(result.err, Contains(dir.file("images") + ": truncated: 10 images of 28x28 needs 7840 bytes"));
}

TEST_CASE("an IDX file with bytes past what its header announces", "[e2e][data]") {
  // A damaged count that is too small, or another file appended: the rest would be dropped silently.
  ScratchDir dir;
  write_idx_images(dir.file("images"), 10, false);
  write_idx_labels(dir.file("labels"), 10, true);
  std::ofstream(dir.file("images"), std::ios::binary | std::ios::app) << std::string(784, '\x07');
  CommandResult result = train_idx(dir);
  CHECK(result.exit_code == 2);
  CHECK_THAT(result.err, Contains(dir.file("images") + ": holds more bytes than its header announces (10 images of 28x28)"));
  write_idx_images(dir.file("images"), 10, true);
  write_idx_labels(dir.file("labels"), 12, false);
  std::string labels = read_text(dir.file("labels"));
  labels[7] = 10;  // the count's low byte: 12 -> 10, two labels left over
  std::ofstream(dir.file("labels"), std::ios::binary) << labels;
  result = train_idx(dir);
  CHECK(result.exit_code == 2);
  CHECK_THAT(result.err, Contains(dir.file("labels") + ": holds more bytes than its header announces (10 labels)"));
}

TEST_CASE("an IDX header whose counts the file cannot hold", "[e2e][data]") {
  // A damaged header used to be believed: LibTorch then failed to allocate terabytes, with a C++ stack.
  ScratchDir dir;
  write_idx_labels(dir.file("labels"), 10, false);
  auto with_header = [&](uint32_t count, uint32_t rows, uint32_t cols) {
    write_idx_images(dir.file("images"), 10, false);
    std::string bytes = read_text(dir.file("images"));
    for (int field = 0; field < 3; ++field) {
      const uint32_t value = field == 0 ? count : field == 1 ? rows : cols;
      for (int byte = 0; byte < 4; ++byte) bytes[4 + 4 * field + byte] = static_cast<char>(value >> (24 - 8 * byte));
    }
    std::ofstream(dir.file("images"), std::ios::binary) << bytes;
    return train_idx(dir);
  };
  CommandResult result = with_header(0xFFFFFFFF, 28, 28);
  CHECK(result.exit_code == 2);
  CHECK_THAT(result.err, Contains(dir.file("images") + ": the header gives 4294967295 images of 28x28 pixels"));
  result = with_header(10, 0x7FFFFFFF, 0x7FFFFFFF);
  CHECK(result.exit_code == 2);
  CHECK_THAT(result.err, Contains("images of 2147483647x2147483647 pixels"));
  result = with_header(1000000, 28, 28);  // plausible, but the file holds 10
  CHECK(result.exit_code == 2);
  CHECK_THAT(result.err, Contains(dir.file("images") + ": truncated: 1000000 images of 28x28 needs 784000000 bytes, the file has 7840"));
}

TEST_CASE("held-out IDX images of another size than the training images", "[e2e][data]") {
  ScratchDir dir;
  write_idx_images(dir.file("images"), 10, false);
  write_idx_labels(dir.file("labels"), 10, false);
  std::string small = read_text(dir.file("images"));
  small[11] = 10;  // rows 28 -> 10
  small[15] = 10;  // cols 28 -> 10
  std::ofstream(dir.file("eval_images"), std::ios::binary) << small.substr(0, 16 + 10 * 100);
  const CommandResult result = train(dir, "data: {kind: idx, train_path: " + dir.file("images") + ", train_labels_path: " + dir.file("labels") +
                                              ", eval_path: " + dir.file("eval_images") + ", eval_labels_path: " + dir.file("labels") + "}\n");
  CHECK(result.exit_code == 2);
  CHECK_THAT(result.err, Contains(dir.file("eval_images") + ": images of 10x10 pixels, but the training images (" + dir.file("images") + ") are 28x28"));
}

TEST_CASE("a CSV with a non-numeric cell", "[e2e][data]") {
  ScratchDir dir;
  dir.write("train.csv", "a,b,label\n1,2,0\n3,x7,1\n");
  const CommandResult result = train(dir, "model: {name: mlp, input_size: 2, num_classes: 2}\n"
                                          "data: {kind: csv, train_path: " + dir.file("train.csv") + "}\n");
  CHECK(result.exit_code == 2);
  CHECK_THAT(result.err, Contains(dir.file("train.csv") + ":3: column 'b': got \"x7\", expected a number"));

  // Binary bytes in a cell are shown escaped and cut short, not written to the terminal.
  dir.write("binary.csv", "a,b,label\n1,2,0\n3,\x01\x02" + std::string(100, 'z') + ",1\n");
  const CommandResult binary = train(dir, "model: {name: mlp, input_size: 2, num_classes: 2}\n"
                                          "data: {kind: csv, train_path: " + dir.file("binary.csv") + "}\n");
  CHECK(binary.exit_code == 2);
  CHECK_THAT(binary.err, Contains(":3: column 'b': got \"\\x01\\x02zzzz") && Contains("zzz...\", expected a number"));
  CHECK(binary.err.find('\x01') == std::string::npos);
}

TEST_CASE("a CSV with a cell that is not a finite float32", "[e2e][data]") {
  // Each would only show later as a non-finite loss, blamed on the learning rate.
  for (const std::string cell : {"nan", "inf", "-1e999", "1e39"}) {
    CAPTURE(cell);
    ScratchDir dir;
    dir.write("train.csv", "a,b,label\n1,2,0\n3," + cell + ",1\n");
    const CommandResult result = train(dir, "model: {name: mlp, input_size: 2, num_classes: 2}\n"
                                            "data: {kind: csv, train_path: " + dir.file("train.csv") + "}\n");
    CHECK(result.exit_code == 2);
    CHECK_THAT(result.err, Contains(dir.file("train.csv") + ":3: column 'b': got \"" + cell + "\", expected a finite number"));
  }
}

TEST_CASE("CSV shape problems", "[e2e][data]") {
  ScratchDir dir;
  dir.write("train.csv", "a,b,label\n1,2,0\n3,4\n");
  CommandResult result = train(dir, "model: {name: mlp, input_size: 2, num_classes: 2}\n"
                                    "data: {kind: csv, train_path: " + dir.file("train.csv") + "}\n");
  CHECK(result.exit_code == 2);
  CHECK_THAT(result.err, Contains(":3: 2 cells, expected 3"));
  dir.write("nolabel.csv", "a,b,c\n1,2,0\n");
  result = train(dir, "model: {name: mlp, input_size: 2, num_classes: 2}\ndata: {kind: csv, train_path: " +
                          dir.file("nolabel.csv") + "}\n");
  CHECK(result.exit_code == 2);
  CHECK_THAT(result.err, Contains("no column named 'label' (data.label_column); the header has: a, b, c"));
  dir.write("wide.csv", "a,b,c,label\n1,2,3,0\n1,2,3,1\n");
  result = train(dir, "model: {name: mlp, input_size: 2, num_classes: 2}\ndata: {kind: csv, train_path: " +
                          dir.file("wide.csv") + "}\n");
  CHECK(result.exit_code == 2);
  CHECK_THAT(result.err, Contains("model.input_size: got 2, but the data has 3 features per sample"));
  // A second label column would be read as a feature: the labels leaking into the inputs.
  dir.write("twice.csv", "a,label,label\n1,0,0\n2,1,1\n");
  result = train(dir, "model: {name: mlp, input_size: 2, num_classes: 2}\ndata: {kind: csv, train_path: " +
                          dir.file("twice.csv") + "}\n");
  CHECK(result.exit_code == 2);
  CHECK_THAT(result.err, Contains(dir.file("twice.csv") + ": the header names the label column 'label' (data.label_column) twice"));
}
