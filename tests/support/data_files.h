// defines: write_idx_images, write_idx_labels, write_tokens, write_csv — small data files for tests
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace trainc::test {

// MNIST-format files with `count` random 28x28 images (gzip'd when `gzip`), labels below 10.
void write_idx_images(const std::string& path, int64_t count, bool gzip, uint32_t magic = 0x00000803);
void write_idx_labels(const std::string& path, int64_t count, bool gzip);
// uint16 tokens below `vocab`, raw (nanoGPT) or with llm.c's 256-int32 header.
void write_tokens(const std::string& path, int64_t count, int64_t vocab, bool llmc_header);
// A CSV with a header "f0,...,f{n-1},label" and `rows` rows whose label depends on the features.
void write_csv(const std::string& path, int64_t rows, int64_t features);

}  // namespace trainc::test
