// defines: TuningCache
//
// max-autotune's choices kept across runs: one small text file per measured choice in
// $TRAINC_CACHE_DIR/autotune/, named by a hash of its key. The key spells out everything the
// measurement depended on: the GPU and the versions of the libraries that ran it (CUDA, cuDNN,
// LibTorch), the call or kernel, its inputs' shapes, dtypes and strides, and the candidates. A run
// that finds the file reads the choice instead of measuring again. Files are published with an
// atomic rename (runtime/kernel_cache), so runs sharing the folder never read half a record. A
// record that does not parse, or whose key is not the one asked for, is measured again and replaced.
// A change of how candidates are measured changes kMagic's number, so older records are not read.
//
// A record:
//   trainc autotune 1
//   key: NVIDIA H200 (sm_90), ... | attention_grad causal scale 0.125 | bf16[16,12,1024,64]/... | flash,efficient,cudnn
//   choice: cudnn
//   measured: flash 1.101 ms, efficient 1.530 ms, cudnn 0.982 ms
#pragma once

#include <optional>
#include <string>

namespace trainc {

class TuningCache {
 public:
  // `directory` empty: choices live for this process only.
  explicit TuningCache(std::string directory) : directory_(std::move(directory)) {}

  std::optional<std::string> find(const std::string& key) const;
  void store(const std::string& key, const std::string& choice, const std::string& measured) const;

  const std::string& directory() const { return directory_; }
  std::string path_of(const std::string& key) const;

 private:
  std::string directory_;
};

}  // namespace trainc
