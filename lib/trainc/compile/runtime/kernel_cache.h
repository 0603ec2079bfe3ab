// defines: CompilerSettings, compiler_settings_from_environment, kernel_cache_directory,
//          content_hash, publish_file, CacheEntry, cache_entry_trailer, read_cache_entry,
//          discard_damaged_entry, KernelLibrary, LibrarySource, LibraryBuild, build_kernel_libraries
//
// Generated C++ becomes shared libraries here. Each library is keyed by a content hash of its
// source, the compiler and its version, the flags, the CPU it targets and trainc's version; a
// library already in the cache directory is loaded without compiling. A library's kernels are
// split into several translation units compiled in parallel, then linked. Runs that share a cache
// (parallel batch jobs) each build in a private folder and publish with an atomic rename, so a
// reader never sees a half-written file. A compiler failure is an error that shows the compiler's
// log and where the generated source was left.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace trainc {

struct CompilerSettings {
  std::string compiler = "c++";    // $CXX when set
  std::vector<std::string> flags;  // -O3 -march=native -fopenmp ...
  std::string cache_dir;           // $TRAINC_CACHE_DIR, else $XDG_CACHE_HOME/trainc (absolute only), else ~/.cache/trainc
  int jobs = 1;                    // parallel compiler processes
};

CompilerSettings compiler_settings_from_environment();

// The cache's folders: CPU libraries, CUDA cubins, max-autotune's choices.
inline constexpr const char* kCpuKernelsFolder = "cpu-kernels";
inline constexpr const char* kCudaKernelsFolder = "cuda-kernels";
inline constexpr const char* kAutotuneFolder = "autotune";  // max-autotune's measured choices

// The cache's folder for one kind of kernels, created if missing; a UserError (exit 2) naming
// TRAINC_CACHE_DIR when it cannot be.
std::string kernel_cache_directory(const CompilerSettings& settings, const std::string& kind = kCpuKernelsFolder);

// A 64-bit content hash of `parts` (each part delimited), as 16 hex digits: a cache key.
std::string content_hash(const std::vector<std::string>& parts);

// Writes `bytes` to `dir`/`name` through a private temporary file and an atomic rename, so a
// concurrent reader sees no file or a complete one.
void publish_file(const std::string& dir, const std::string& name, const std::string& bytes);

// A cache entry (a CPU library, a cubin) ends with a trailer: "trainc-xxh3:" and the checksum of
// its key and every byte before it. Whatever sits at a key's name is otherwise trusted: a truncated
// library faults the process that loads it (SIGBUS), a damaged one computes wrong numbers, and
// another key's entry copied there runs the wrong kernels. An entry is used only where its trailer
// holds; one written by a single rename of a complete file, as publish_file does, always holds it.
std::string cache_entry_trailer(const std::string& key, const std::string& bytes);

enum class CacheEntry { missing, damaged, intact };

// What is at `path`, cached under `key`: missing, damaged (not a regular file, or its trailer does
// not hold), or intact, and then its bytes before the trailer in `body` when given.
CacheEntry read_cache_entry(const std::string& path, const std::string& key, std::string* body = nullptr);

// Warns that the entry at `path` is damaged and will be compiled again; removes it where it is not
// a regular file (a folder or a FIFO would block publishing the new one, whose rename replaces a file).
void discard_damaged_entry(const std::string& path);

class KernelLibrary {
 public:
  KernelLibrary(void* handle, std::string path) : handle_(handle), path_(std::move(path)) {}
  ~KernelLibrary();
  KernelLibrary(const KernelLibrary&) = delete;
  KernelLibrary& operator=(const KernelLibrary&) = delete;

  void* symbol(const std::string& name) const;  // an internal error when missing
  const std::string& path() const { return path_; }

 private:
  void* handle_;
  std::string path_;
};

struct LibrarySource {
  std::string prelude;               // shared by every translation unit
  std::vector<std::string> kernels;  // function definitions; any subset compiles with the prelude
};

struct LibraryBuild {
  std::shared_ptr<KernelLibrary> library;
  std::string key;         // the content hash naming it in the cache
  bool cache_hit = false;  // loaded from the cache: nothing was compiled
};

std::vector<LibraryBuild> build_kernel_libraries(const std::vector<LibrarySource>& sources, const CompilerSettings& settings);

}  // namespace trainc
