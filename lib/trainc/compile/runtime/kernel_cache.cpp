#include "trainc/compile/runtime/kernel_cache.h"

#include <dlfcn.h>
#include <unistd.h>

#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <sstream>
#include <thread>

#include <spdlog/spdlog.h>

#include "trainc/common/checksum.h"
#include "trainc/common/error.h"

namespace trainc {

namespace fs = std::filesystem;

namespace {

std::string quote(const std::string& text) {
  std::string quoted = "'";
  for (char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

struct CommandResult {
  int status = 0;
  std::string output;  // stdout and stderr together
};

CommandResult run_command(const std::string& command) {
  CommandResult result;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return {127, "cannot start: " + command};
  char buffer[4096];
  std::size_t n;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) result.output.append(buffer, n);
  const int status = ::pclose(pipe);
  result.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128;
  return result;
}

// The compiler as a shell command: its words quoted one by one, so that CXX="ccache g++" works as
// it does for make (and, as there, a path with spaces does not).
std::string compiler_command(const std::string& compiler) {
  std::istringstream words(compiler);
  std::string command;
  for (std::string word; words >> word;) command += (command.empty() ? "" : " ") + quote(word);
  return command;
}

// What the compiler says it is, once per process: part of every cache key.
std::string compiler_identity(const std::string& compiler) {
  static std::mutex mutex;
  static std::string cached_for, identity;
  std::lock_guard<std::mutex> lock(mutex);
  if (cached_for != compiler || identity.empty()) {
    const CommandResult version = run_command(compiler_command(compiler) + " --version");
    if (version.status != 0) {
      std::string said = version.output;
      std::replace(said.begin(), said.end(), '\n', ' ');
      while (!said.empty() && said.back() == ' ') said.pop_back();
      // A CXX the user set is their input (exit 2); a system without a compiler is the machine's.
      const char* cxx = std::getenv("CXX");
      const bool from_cxx = cxx != nullptr && compiler == cxx;
      throw UserError(std::string(from_cxx ? "CXX=" + compiler + ": " : "inductor: ") + "cannot run the C++ compiler '" + compiler +
                          "' (exit " + std::to_string(version.status) + ": " + said + "); " +
                          (from_cxx ? "expected a C++17 compiler, with its arguments if any (\"ccache g++\")" : "install g++ or set CXX to a C++17 compiler"),
                      from_cxx ? kExitUsage : kExitFailure);
    }
    identity = compiler + ": " + version.output.substr(0, version.output.find('\n'));
    cached_for = compiler;
  }
  return identity;
}

// The CPU the kernels are compiled for (-march=native): its model and feature flags.
std::string cpu_identity() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line, model, flags;
  while (std::getline(cpuinfo, line) && (model.empty() || flags.empty())) {
    if (model.empty() && line.rfind("model name", 0) == 0) model = line;
    if (flags.empty() && line.rfind("flags", 0) == 0) flags = line;
  }
  return model + "\n" + flags;
}

std::string key_of(const LibrarySource& source, const CompilerSettings& settings) {
  // "checksummed": libraries end with their checksum (read_cache_entry), so entries written before that
  // live under other keys and are never mistaken for damaged ones.
  std::vector<std::string> parts = {"trainc " TRAINC_VERSION, "checksummed", compiler_identity(settings.compiler)};
  parts.insert(parts.end(), settings.flags.begin(), settings.flags.end());
  parts.push_back(cpu_identity());
  parts.push_back(source.prelude);
  parts.insert(parts.end(), source.kernels.begin(), source.kernels.end());
  return content_hash(parts);
}

void write_file(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  out.close();
  if (!out) throw UserError("inductor: cannot write " + path.string() + " (is the kernel cache directory writable? set TRAINC_CACHE_DIR)", kExitFailure);
}

// A cache entry's trailer (kernel_cache.h): the tag and 16 hex digits.
constexpr char kTrailerTag[] = "trainc-xxh3:";
constexpr std::size_t kTrailerSize = sizeof(kTrailerTag) - 1 + 16;

// The library's trailer (kernel_cache.h), after what the compiler wrote: the loader ignores bytes
// past the ELF's segments.
void append_trailer(const fs::path& library, const std::string& key) {
  std::ifstream in(library, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::ofstream out(library, std::ios::binary | std::ios::app);
  out << cache_entry_trailer(key, bytes);
  out.close();
  if (!in || !out) throw UserError("inductor: cannot write " + library.string() + " (is the kernel cache directory writable? set TRAINC_CACHE_DIR)", kExitFailure);
}

std::shared_ptr<KernelLibrary> load(const fs::path& path) {
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) return nullptr;
  return std::make_shared<KernelLibrary>(handle, path.string());
}

// Runs `commands` on up to `jobs` threads; the failures, in order.
std::vector<std::pair<std::size_t, CommandResult>> run_parallel(const std::vector<std::string>& commands, int jobs) {
  std::atomic<std::size_t> next{0};
  std::mutex mutex;
  std::vector<std::pair<std::size_t, CommandResult>> failures;
  const auto worker = [&] {
    for (std::size_t i = next++; i < commands.size(); i = next++) {
      CommandResult result = run_command(commands[i]);
      if (result.status != 0) {
        std::lock_guard<std::mutex> lock(mutex);
        failures.emplace_back(i, std::move(result));
      }
    }
  };
  std::vector<std::thread> threads;
  for (int t = 1; t < std::min<int>(jobs, static_cast<int>(commands.size())); ++t) threads.emplace_back(worker);
  worker();
  for (std::thread& thread : threads) thread.join();
  std::sort(failures.begin(), failures.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  return failures;
}

}  // namespace

CompilerSettings compiler_settings_from_environment() {
  CompilerSettings settings;
  if (const char* cxx = std::getenv("CXX"); cxx != nullptr && *cxx != '\0') settings.compiler = cxx;
  settings.flags = {"-std=c++17", "-O3", "-march=native", "-fopenmp", "-fno-math-errno", "-fPIC", "-w"};
  if (const char* dir = std::getenv("TRAINC_CACHE_DIR"); dir != nullptr && *dir != '\0') {
    // Blanks are a value left unset in a script (TRAINC_CACHE_DIR="$EMPTY ", or a CRLF line's
    // "\r"), not a folder to make.
    if (std::string(dir).find_first_not_of(" \t\n\r\v\f") == std::string::npos) {
      throw UserError(std::string("TRAINC_CACHE_DIR='") + dir + "': expected a directory path, or the variable unset for the default");
    }
    settings.cache_dir = dir;
  } else if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg == '/') {
    // The XDG spec: a relative path (blanks included) in XDG_CACHE_HOME is invalid and ignored.
    settings.cache_dir = std::string(xdg) + "/trainc";
  } else if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    settings.cache_dir = std::string(home) + "/.cache/trainc";
  } else {
    settings.cache_dir = "/tmp/trainc-cache-" + std::to_string(::getuid());
  }
  settings.jobs = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  return settings;
}

KernelLibrary::~KernelLibrary() {
  if (handle_ != nullptr) ::dlclose(handle_);
}

void* KernelLibrary::symbol(const std::string& name) const {
  void* address = ::dlsym(handle_, name.c_str());
  TRAINC_CHECK(address != nullptr, "kernel " + name + " missing from " + path_);
  return address;
}

std::string content_hash(const std::vector<std::string>& parts) {
  Checksum checksum;
  for (const std::string& part : parts) checksum.update(part.data(), part.size() + 1);  // with its NUL: parts stay apart
  return checksum.hex();
}

void publish_file(const std::string& dir, const std::string& name, const std::string& bytes) {
  static std::atomic<int> counter{0};
  const fs::path temporary = fs::path(dir) / (name + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
  write_file(temporary, bytes);
  std::error_code error;
  fs::rename(temporary, fs::path(dir) / name, error);
  if (error) {
    fs::remove(temporary, error);
    throw UserError("inductor: cannot move " + name + " into the kernel cache " + dir + ": " + error.message(), kExitFailure);
  }
}

namespace {
std::string trailer_of(const std::string& key, const char* bytes, std::size_t size) {
  Checksum checksum;
  checksum.update(key.data(), key.size());
  checksum.update(bytes, size);
  return kTrailerTag + checksum.hex();
}
}  // namespace

std::string cache_entry_trailer(const std::string& key, const std::string& bytes) { return trailer_of(key, bytes.data(), bytes.size()); }

CacheEntry read_cache_entry(const std::string& path, const std::string& key, std::string* body) {
  std::error_code error;
  if (!fs::exists(path, error)) return CacheEntry::missing;
  if (!fs::is_regular_file(path, error)) return CacheEntry::damaged;  // a FIFO would block the read, a directory fail it
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.size() < kTrailerSize) return CacheEntry::damaged;
  const std::size_t length = bytes.size() - kTrailerSize;
  if (bytes.compare(length, kTrailerSize, trailer_of(key, bytes.data(), length)) != 0) return CacheEntry::damaged;
  if (body != nullptr) {
    bytes.resize(length);
    *body = std::move(bytes);
  }
  return CacheEntry::intact;
}

void discard_damaged_entry(const std::string& path) {
  spdlog::warn("kernel cache: " + path + " is damaged (its checksum does not hold); compiling it again");
  // A damaged file stays until the new entry's rename replaces it: removed now, it could be
  // another run's entry published since it was read. A folder or a FIFO is in the rename's way.
  std::error_code error;
  if (!fs::is_regular_file(path, error)) fs::remove_all(path, error);
}

std::string kernel_cache_directory(const CompilerSettings& settings, const std::string& kind) {
  const fs::path dir = fs::path(settings.cache_dir) / kind;
  std::error_code error;
  fs::create_directories(dir, error);
  if (error || !fs::is_directory(dir) || ::access(dir.c_str(), W_OK) != 0) {
    throw UserError("TRAINC_CACHE_DIR: cannot create the kernel cache directory " + dir.string() + " (" +
                    (error ? error.message() : "not writable") + "); expected a writable directory");
  }
  return dir.string();
}

std::vector<LibraryBuild> build_kernel_libraries(const std::vector<LibrarySource>& sources, const CompilerSettings& settings) {
  const fs::path dir = kernel_cache_directory(settings);
  std::error_code error;

  std::vector<LibraryBuild> builds(sources.size());
  struct Pending {
    std::size_t index;
    fs::path work;                // this process's private build folder
    std::vector<fs::path> units;  // translation units
  };
  std::vector<Pending> pending;
  static std::atomic<int> counter{0};
  for (std::size_t i = 0; i < sources.size(); ++i) {
    builds[i].key = key_of(sources[i], settings);
    const fs::path cached = dir / (builds[i].key + ".so");
    const CacheEntry entry = read_cache_entry(cached.string(), builds[i].key);
    if (entry == CacheEntry::intact) {
      if (auto library = load(cached)) {
        builds[i].library = library;
        builds[i].cache_hit = true;
        continue;
      }
    }
    if (entry == CacheEntry::damaged) discard_damaged_entry(cached.string());
    Pending job{i, dir / ("build-" + builds[i].key + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++)), {}};
    fs::create_directories(job.work);
    // Spread the kernels over `jobs` translation units of about equal length.
    const std::vector<std::string>& kernels = sources[i].kernels;
    const std::size_t units = std::max<std::size_t>(1, std::min<std::size_t>(static_cast<std::size_t>(settings.jobs), kernels.size()));
    std::vector<std::string> texts(units, sources[i].prelude);
    std::vector<std::size_t> lengths(units, 0);
    for (const std::string& kernel : kernels) {
      const std::size_t shortest = static_cast<std::size_t>(std::min_element(lengths.begin(), lengths.end()) - lengths.begin());
      texts[shortest] += kernel;
      lengths[shortest] += kernel.size();
    }
    for (std::size_t u = 0; u < units; ++u) {
      job.units.push_back(job.work / ("unit" + std::to_string(u) + ".cpp"));
      write_file(job.units.back(), texts[u]);
    }
    std::string whole = sources[i].prelude;
    for (const std::string& kernel : kernels) whole += kernel;
    write_file(job.work / "kernels.cpp", whole);
    pending.push_back(std::move(job));
  }
  if (pending.empty()) return builds;

  std::string flags;
  for (const std::string& flag : settings.flags) flags += " " + flag;
  const auto fail = [&](const Pending& job, const CommandResult& result) {
    throw UserError("inductor: the C++ compiler failed on generated kernels (exit " + std::to_string(result.status) +
                        "); the generated source is in " + job.work.string() + "\ncompiler log:\n" + result.output,
                    kExitFailure);
  };
  std::vector<std::string> compiles;
  std::vector<const Pending*> owner;
  for (const Pending& job : pending) {
    for (const fs::path& unit : job.units) {
      compiles.push_back(compiler_command(settings.compiler) + flags + " -c " + quote(unit.string()) + " -o " + quote(unit.string() + ".o"));
      owner.push_back(&job);
    }
  }
  if (const auto failures = run_parallel(compiles, settings.jobs); !failures.empty()) fail(*owner[failures[0].first], failures[0].second);
  std::vector<std::string> links;
  for (const Pending& job : pending) {
    std::string objects;
    for (const fs::path& unit : job.units) objects += " " + quote(unit.string() + ".o");
    links.push_back(compiler_command(settings.compiler) + flags + " -shared" + objects + " -o " + quote((job.work / "kernels.so").string()) + " -lmvec");
  }
  if (const auto failures = run_parallel(links, settings.jobs); !failures.empty()) fail(pending[failures[0].first], failures[0].second);

  for (const Pending& job : pending) {
    LibraryBuild& build = builds[job.index];
    const fs::path target = dir / (build.key + ".so");
    // A compiler that reports success without writing a library publishes nothing.
    const fs::path library = job.work / "kernels.so";
    if (!fs::is_regular_file(library, error) || fs::file_size(library, error) == 0) {
      throw UserError("inductor: the C++ compiler '" + settings.compiler + "' exited 0 but wrote no library; the generated source is in " +
                          job.work.string(),
                      kExitFailure);
    }
    // Publish the source next to the library, then the library itself: each rename is atomic, so
    // a concurrent run sees either no file or a complete one.
    append_trailer(library, build.key);
    fs::rename(job.work / "kernels.cpp", dir / (build.key + ".cpp"), error);
    fs::rename(job.work / "kernels.so", target, error);
    if (error) throw UserError("inductor: cannot move a compiled library into " + dir.string() + ": " + error.message(), kExitFailure);
    build.library = load(target);
    if (build.library == nullptr) {
      const std::string reason = ::dlerror();
      fs::remove(target, error);
      throw UserError("inductor: the library the C++ compiler '" + settings.compiler + "' wrote cannot be loaded (" + reason +
                          "); the generated source is in " + (dir / (build.key + ".cpp")).string(),
                      kExitFailure);
    }
    fs::remove_all(job.work, error);
  }
  return builds;
}

}  // namespace trainc
