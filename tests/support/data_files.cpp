#include "support/data_files.h"

#include <zlib.h>

#include <fstream>
#include <random>

namespace trainc::test {
namespace {

void write_bytes(const std::string& path, const std::string& bytes, bool gzip) {
  if (gzip) {
    gzFile file = gzopen(path.c_str(), "wb");
    gzwrite(file, bytes.data(), static_cast<unsigned>(bytes.size()));
    gzclose(file);
  } else {
    std::ofstream(path, std::ios::binary) << bytes;
  }
}

void append_big_endian(std::string& bytes, uint32_t value) {
  for (int shift = 24; shift >= 0; shift -= 8) bytes.push_back(static_cast<char>((value >> shift) & 0xFF));
}

}  // namespace

void write_idx_images(const std::string& path, int64_t count, bool gzip, uint32_t magic) {
  std::string bytes;
  append_big_endian(bytes, magic);
  append_big_endian(bytes, static_cast<uint32_t>(count));
  append_big_endian(bytes, 28);
  append_big_endian(bytes, 28);
  std::mt19937 generator(1);
  for (int64_t i = 0; i < count * 28 * 28; ++i) bytes.push_back(static_cast<char>(generator() & 0xFF));
  write_bytes(path, bytes, gzip);
}

void write_idx_labels(const std::string& path, int64_t count, bool gzip) {
  std::string bytes;
  append_big_endian(bytes, 0x00000801);
  append_big_endian(bytes, static_cast<uint32_t>(count));
  for (int64_t i = 0; i < count; ++i) bytes.push_back(static_cast<char>(i % 10));
  write_bytes(path, bytes, gzip);
}

void write_tokens(const std::string& path, int64_t count, int64_t vocab, bool llmc_header) {
  std::ofstream file(path, std::ios::binary);
  if (llmc_header) {
    std::vector<int32_t> header(256, 0);
    header[0] = 20240520;
    header[1] = 1;
    header[2] = static_cast<int32_t>(count);
    file.write(reinterpret_cast<const char*>(header.data()), static_cast<std::streamsize>(header.size() * 4));
  }
  for (int64_t i = 0; i < count; ++i) {
    const auto token = static_cast<uint16_t>((i * 7 + i / 3) % vocab);  // a learnable pattern
    file.write(reinterpret_cast<const char*>(&token), 2);
  }
}

void write_csv(const std::string& path, int64_t rows, int64_t features) {
  std::ofstream file(path);
  for (int64_t f = 0; f < features; ++f) file << "f" << f << ",";
  file << "label\n";
  std::mt19937 generator(2);
  std::normal_distribution<float> normal;
  for (int64_t r = 0; r < rows; ++r) {
    float first = 0;
    for (int64_t f = 0; f < features; ++f) {
      const float value = normal(generator);
      if (f == 0) first = value;
      file << value << ",";
    }
    file << (first > 0 ? 1 : 0) << "\n";
  }
}

}  // namespace trainc::test
