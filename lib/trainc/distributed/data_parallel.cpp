#include "trainc/distributed/data_parallel.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <thread>

#include "trainc/common/error.h"

// Set per source file by the build, for the process groups it found.
#ifndef TRAINC_WITH_GLOO
#define TRAINC_WITH_GLOO 0
#endif
#ifndef TRAINC_WITH_NCCL
#define TRAINC_WITH_NCCL 0
#endif

#if TRAINC_WITH_GLOO
#ifndef USE_C10D_GLOO  // the gloo declarations of c10d's header are behind it
#define USE_C10D_GLOO
#endif
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#endif
#if TRAINC_WITH_NCCL  // USE_C10D_NCCL, which its header is behind, comes from the build
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#if TRAINC_WITH_GLOO || TRAINC_WITH_NCCL
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <mutex>

#include "trainc/compat/torch_compat.h"
#endif

namespace trainc {

#if TRAINC_WITH_GLOO || TRAINC_WITH_NCCL

namespace {

// What gloo's and NCCL's process groups derive from: c10d's Backend since PyTorch 2.0.
#if TRAINC_TORCH_2
using CollectiveGroup = c10d::Backend;
#else
using CollectiveGroup = c10d::ProcessGroup;
#endif

constexpr int64_t kBucketBytes = 25 * 1024 * 1024;

std::string hostname() {
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  return name;
}

// The start of a c10d error, whose first lines say what failed (its C++ backtrace follows).
std::string excerpt(const std::exception& error) {
  const std::string text = error.what();
  const auto backtrace = text.find("\nException raised from");
  return text.substr(0, std::min<std::size_t>(backtrace, 600));
}

// Gone, or a zombie nobody has reaped yet (dead all the same).
bool process_alive(int pid) {
  if (kill(pid, 0) != 0 && errno == ESRCH) return false;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  const auto after_name = line.rfind(") ");
  return after_name == std::string::npos || line.substr(after_name + 2, 1) != "Z";
}

}  // namespace

// Gradients all-reduced together: parameter indices, and the flat buffer and work once launched.
struct Bucket {
  std::vector<std::size_t> members;
  std::size_t ready = 0;
  std::vector<at::Tensor> flat;
  c10::intrusive_ptr<c10d::Work> work;
};

struct DataParallel::Impl {
  World world;
  std::chrono::seconds timeout;
  c10::intrusive_ptr<c10d::TCPStore> store;
  c10::intrusive_ptr<CollectiveGroup> group;
#if TRAINC_WITH_NCCL
  c10::intrusive_ptr<c10d::ProcessGroupNCCL> nccl;  // the same group, when it is NCCL's
#endif
  // Where the collectives' tensors live: the CPU for gloo, this rank's GPU for NCCL.
  c10::Device device{c10::kCPU};
  int64_t agreement_round = 0;  // calls of agree_on_signal so far, the same on every rank

  // With `on_host`, the host waits until the collective is done, or throws after `timeout` (a
  // rank died or hangs): what gloo always does, and NCCL for the values the host reads next (the
  // logged loss, the generator states at a save). Without, NCCL's wait only orders the current CUDA
  // stream after the collective, so the gradients' all-reduce costs the host nothing.
  void wait(const c10::intrusive_ptr<c10d::Work>& work, bool on_host) {
    if (device.is_cuda() && !on_host) {
      work->wait();
    } else {
      work->wait(std::chrono::duration_cast<std::chrono::milliseconds>(timeout));
    }
  }

  // Runs one collective; a failure names the ranks of this host whose process is gone.
  template <typename Collective>
  void run(const std::string& what, Collective collective, bool on_host = true) {
    try {
      wait(collective(), on_host);
    } catch (const std::exception& error) {
      fail_collective(what, error);
    }
  }

  // The message every failed collective ends with: what failed, which ranks are gone, and c10d's words.
  [[noreturn]] void fail_collective(const std::string& what, const std::exception& error) {
    fail("rank " + std::to_string(world.rank) + ": " + what + " failed: " + missing_ranks() + " (" + excerpt(error) + ")");
  }

  // A failed collective ends the run. Over NCCL it ends the process here and now: the collective
  // that never completed still occupies the GPU, and the process group's destructor (reached by
  // unwinding) would wait for it forever. Checkpoints are written whole or not at all, so
  // skipping the unwinding loses nothing.
  [[noreturn]] void fail(const std::string& message) {
    if (!device.is_cuda()) throw UserError(message, kExitFailure);
    std::fflush(nullptr);
    std::fprintf(stderr, "trainc: error: %s\n", message.c_str());
    std::fflush(stderr);
    std::_Exit(kExitFailure);
  }

  std::vector<at::Tensor> parameters;
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators;  // kept alive: they carry the hooks
  std::vector<Bucket> buckets;
  std::vector<std::size_t> bucket_of;  // by parameter index
  std::mutex mutex;                    // hooks run on autograd's thread
  bool armed = false;
  std::size_t next_launch = 0;

  // Buckets over the parameters in reverse, cut at kBucketBytes and where the dtype changes.
  void make_buckets() {
    bucket_of.assign(parameters.size(), 0);
    int64_t bytes = 0;
    for (std::size_t k = parameters.size(); k-- > 0;) {
      const int64_t size = static_cast<int64_t>(parameters[k].nbytes());
      if (buckets.empty() || bytes + size > kBucketBytes ||
          parameters[buckets.back().members.front()].scalar_type() != parameters[k].scalar_type()) {
        buckets.emplace_back();
        bytes = 0;
      }
      buckets.back().members.push_back(k);
      bucket_of[k] = buckets.size() - 1;
      bytes += size;
    }
  }

  // A post hook on each parameter's gradient accumulator reports when its .grad is complete. Only
  // for steps that overlap the all-reduce with autograd's backward: an accumulator records the
  // CUDA stream current when it is made, and a step captured as a CUDA graph on another stream
  // must not find one made here.
  void add_gradient_hooks() {
    for (std::size_t k = 0; k < parameters.size(); ++k) {
      if (!parameters[k].requires_grad()) continue;
      accumulators.push_back(torch::autograd::impl::grad_accumulator(parameters[k]));
      accumulators.back()->add_post_hook(std::make_unique<GradientReady>(this, k));
    }
  }

  // A one-element all-reduce that the host reads back: no rank passes it before all reach it.
  void barrier() {
    std::vector<at::Tensor> one = {at::zeros({1}, at::TensorOptions().dtype(at::kInt).device(device))};
    run("waiting for every rank", [&] { return group->allreduce(one); });
    one[0].item<int>();
  }

  // No bucket launched or ready: a step's communication starts from here. Under `mutex`.
  void start_step() {
    for (Bucket& bucket : buckets) {
      bucket.ready = 0;
      bucket.flat.clear();
      bucket.work.reset();
    }
    next_launch = 0;
  }

  void on_gradient_ready(std::size_t parameter) {
    std::lock_guard<std::mutex> lock(mutex);
    if (!armed) return;
    Bucket& bucket = buckets[bucket_of[parameter]];
    ++bucket.ready;
    // Launch in bucket order only, so every rank issues the same collectives in the same order.
    while (next_launch < buckets.size() && buckets[next_launch].ready == buckets[next_launch].members.size()) {
      launch(buckets[next_launch++]);
    }
  }

  void launch(Bucket& bucket) {
    std::vector<at::Tensor> parts;
    for (std::size_t member : bucket.members) {
      if (parameters[member].grad().defined()) parts.push_back(parameters[member].grad().reshape({-1}));
    }
    if (parts.empty()) return;
    bucket.flat = {at::cat(parts)};
    try {
      bucket.work = group->allreduce(bucket.flat);
    } catch (const std::exception& error) {
      fail_collective("all-reducing gradients", error);
    }
  }

  struct GradientReady : torch::autograd::FunctionPostHook {
    GradientReady(Impl* impl, std::size_t parameter) : impl(impl), parameter(parameter) {}
    torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                              const torch::autograd::variable_list&) override {
      impl->on_gradient_ready(parameter);
      return outputs;
    }
    Impl* impl;
    std::size_t parameter;
  };

  // The ranks on this host whose process is gone (each rank publishes host and pid at start).
  std::vector<std::string> dead_ranks_on_this_host() {
    std::vector<std::string> gone;
    for (int rank = 0; rank < world.size; ++rank) {
      if (rank == world.rank) continue;
      const std::vector<uint8_t> bytes = store->get("trainc/process/" + std::to_string(rank));
      const std::string text(bytes.begin(), bytes.end());
      const auto colon = text.rfind(':');
      if (text.substr(0, colon) == hostname() && !process_alive(std::stoi(text.substr(colon + 1)))) gone.push_back(std::to_string(rank));
    }
    return gone;
  }

  // Waits until the store holds `key`. A rank that has died never writes what is awaited, and the
  // store does not notice; so look every second for a dead rank on this host (one on another host
  // shows as ddp_timeout running out). Throws on either.
  void wait_for_key(const std::string& key) {
    const auto start = std::chrono::steady_clock::now();
    auto next_look = start + std::chrono::seconds(1);
    std::chrono::microseconds pause(20);  // ranks usually arrive close together: look again soon
    while (!store->check({key})) {
      const auto now = std::chrono::steady_clock::now();
      if (now - start > timeout) throw std::runtime_error("no answer within ddp_timeout");
      if (now > next_look) {
        if (!dead_ranks_on_this_host().empty()) throw std::runtime_error("a rank's process is gone");
        next_look = now + std::chrono::seconds(1);
      }
      std::this_thread::sleep_for(pause);
      pause = std::min<std::chrono::microseconds>(2 * pause, std::chrono::milliseconds(1));
    }
  }

  // Each rank publishes host and pid at start; a rank whose pid is gone on this host has died. A
  // killed process closes its sockets before it is gone, so the peers may notice first: look
  // again for up to two seconds before giving up on naming it.
  std::string missing_ranks() {
    std::vector<std::string> gone;
    try {
      for (int attempt = 0; attempt < 20 && gone.empty(); ++attempt) {
        if (attempt > 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
        gone = dead_ranks_on_this_host();
      }
    } catch (const std::exception&) {
      return "rank 0, which hosts the rendezvous store, is unreachable: it has probably died";
    }
    if (gone.empty()) return "a rank on another host died, hung past ddp_timeout, or left the run";
    std::string list;
    for (const std::string& rank : gone) list += (list.empty() ? "" : ", ") + rank;
    return "rank" + std::string(gone.size() > 1 ? "s " : " ") + list + " died";
  }
};

namespace {

// The process groups this build has, for messages.
std::string built_backends() {
  std::string names;
#if TRAINC_WITH_GLOO
  names += "gloo";
#endif
#if TRAINC_WITH_NCCL
  names += names.empty() ? "nccl" : " and nccl";
#endif
  return names;
}

}  // namespace

void DataParallel::check_backend(const std::string& backend, c10::Device device) {
  if ((backend == "nccl") != device.is_cuda()) {
    throw UserError("ddp_backend: " + backend + " with this run on " + device.str() +
                    ": nccl trains on GPUs, gloo on the CPU (set use_cpu: true for gloo)");
  }
  const bool built = (backend == "gloo" && TRAINC_WITH_GLOO) || (backend == "nccl" && TRAINC_WITH_NCCL);
  if (!built) {
    throw UserError("ddp_backend: " + backend + ": this build of trainc runs data-parallel training over " + built_backends() +
                    " only (gloo needs Debian's libgloo-dev, nccl a CUDA LibTorch and nccl.h, found at configure time)");
  }
}

DataParallel::DataParallel(const World& world, const std::string& backend, c10::Device device, std::chrono::seconds timeout,
                           std::vector<at::Tensor> parameters)
    : impl_(std::make_unique<Impl>()) {
  check_backend(backend, device);
  impl_->world = world;
  impl_->timeout = timeout;
  impl_->device = device;
  impl_->parameters = std::move(parameters);
  impl_->make_buckets();
  c10d::TCPStoreOptions options;
  options.port = static_cast<std::uint16_t>(world.master_port);
  options.isServer = world.is_main();
  options.numWorkers = world.size;
  options.waitWorkers = true;
  options.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(timeout);
  try {
    impl_->store = c10::make_intrusive<c10d::TCPStore>(world.master_addr, options);
    impl_->store->set("trainc/process/" + std::to_string(world.rank), [] {
      const std::string text = hostname() + ":" + std::to_string(getpid());
      return std::vector<uint8_t>(text.begin(), text.end());
    }());
    const auto timeout_ms = std::chrono::duration_cast<std::chrono::milliseconds>(timeout);
#if TRAINC_WITH_GLOO
    if (backend == "gloo") {
      auto options = c10d::ProcessGroupGloo::Options::create(timeout_ms);
      options->devices.push_back(
          c10d::ProcessGroupGloo::createDeviceForHostname(world.master_addr == "localhost" ? "127.0.0.1" : world.master_addr));
      impl_->group = c10::make_intrusive<c10d::ProcessGroupGloo>(impl_->store, world.rank, world.size, options);
    }
#endif
#if TRAINC_WITH_NCCL
    if (backend == "nccl") {
      auto options = c10d::ProcessGroupNCCL::Options::create();
      // The process group's watchdog aborts a collective that outlives its timeout and takes the
      // process down without a word about which rank is gone. trainc's own host waits use
      // ddp_timeout; the watchdog gets a minute more, as the backstop for a wait that never comes.
      options->timeout = timeout_ms + std::chrono::minutes(1);
      impl_->nccl = c10::make_intrusive<c10d::ProcessGroupNCCL>(impl_->store, world.rank, world.size, options);
      impl_->group = impl_->nccl;
    }
#endif
  } catch (const UserError&) {
    throw;
  } catch (const std::exception& error) {
    throw UserError("rank " + std::to_string(world.rank) + ": rendezvous at MASTER_ADDR=" + world.master_addr +
                        " MASTER_PORT=" + std::to_string(world.master_port) + " failed within ddp_timeout (" +
                        std::to_string(timeout.count()) + " s): " + excerpt(error),
                    kExitFailure);
  }
}

DataParallel::~DataParallel() = default;

void DataParallel::broadcast(std::vector<at::Tensor>& tensors) {
  for (at::Tensor& tensor : tensors) {
    std::vector<at::Tensor> one = {tensor};
    impl_->run("broadcasting rank 0's parameters", [&] { return impl_->group->broadcast(one); });
  }
}

void DataParallel::expect_gradients() {
  Impl& impl = *impl_;
  if (impl.accumulators.empty()) impl.add_gradient_hooks();
  std::lock_guard<std::mutex> lock(impl.mutex);
  impl.start_step();
  impl.armed = true;
}

void DataParallel::finish_gradients() {
  Impl& impl = *impl_;
  {
    std::lock_guard<std::mutex> lock(impl.mutex);
    impl.armed = false;
    while (impl.next_launch < impl.buckets.size()) impl.launch(impl.buckets[impl.next_launch++]);
  }
  for (Bucket& bucket : impl.buckets) {
    if (!bucket.work) continue;
    impl.run("all-reducing gradients", [&] { return bucket.work; }, /*on_host=*/false);
    bucket.flat[0].div_(impl.world.size);
    int64_t offset = 0;
    for (std::size_t member : bucket.members) {
      at::Tensor grad = impl.parameters[member].grad();
      if (!grad.defined()) continue;
      grad.copy_(bucket.flat[0].narrow(0, offset, grad.numel()).view(grad.sizes()));
      offset += grad.numel();
    }
  }
  std::lock_guard<std::mutex> lock(impl.mutex);
  impl.start_step();  // the next call launches every bucket again, whether or not a backward armed them
}

at::Tensor DataParallel::mean(const at::Tensor& value) {
  std::vector<at::Tensor> one = {value.detach().to(impl_->device, at::kDouble).clone().reshape({1})};
  impl_->run("averaging the logged loss", [&] { return impl_->group->allreduce(one); });
  return (one[0] / impl_->world.size).reshape({}).to(value.device());
}

std::vector<at::Tensor> DataParallel::all_gather(const at::Tensor& tensor) {
  std::vector<at::Tensor> input = {tensor.to(impl_->device).contiguous()};
  std::vector<std::vector<at::Tensor>> output(1);
  for (int rank = 0; rank < impl_->world.size; ++rank) output[0].push_back(at::empty_like(input[0]));
  impl_->run("gathering the ranks' generator states", [&] { return impl_->group->allgather(output, input); });
  std::vector<at::Tensor> gathered;
  for (const at::Tensor& part : output[0]) gathered.push_back(part.to(tensor.device()));
  return gathered;
}

// Round r: a rank with a signal writes it under key/signal, then every rank adds one to key; the
// rank that makes it world_size writes the answer under key/done, which the others wait for. A
// signal written before an arrival is there when the last arrival is counted.
int DataParallel::agree_on_signal(int signal_number) {
  Impl& impl = *impl_;
  const std::string key = "trainc/agree/" + std::to_string(impl.agreement_round);
  int agreed = 0;
  try {
    if (signal_number != 0) impl.store->set(key + "/signal", {static_cast<uint8_t>(signal_number)});
    if (impl.store->add(key, 1) == impl.world.size) {
      const uint8_t signal = impl.store->check({key + "/signal"}) ? impl.store->get(key + "/signal").at(0) : 0;
      impl.store->set(key + "/done", {signal});
    }
    impl.wait_for_key(key + "/done");
    agreed = impl.store->get(key + "/done").at(0);
    // Every rank has left round r - 2 once anyone is in round r: its keys can go.
    if (impl.world.is_main() && impl.agreement_round >= 2) {
      const std::string old = "trainc/agree/" + std::to_string(impl.agreement_round - 2);
      for (const char* suffix : {"", "/done", "/signal"}) impl.store->deleteKey(old + suffix);
    }
  } catch (const std::exception& error) {
    impl.fail_collective("agreeing on a stop", error);
  }
  ++impl.agreement_round;
  return agreed;
}

// An all-reduce read back on the host, rather than the process group's barrier: NCCL's returns
// before the host has waited for anything.
void DataParallel::barrier() { impl_->barrier(); }

void DataParallel::close() {
  barrier();
#if TRAINC_WITH_NCCL
  if (impl_->nccl) impl_->nccl->shutdown();  // else PyTorch warns at exit that it was never destroyed
#endif
}

#else

struct DataParallel::Impl {};

void DataParallel::check_backend(const std::string& backend, c10::Device) {
  throw UserError("ddp_backend: " + backend + ": this build of trainc has no process group: neither gloo (Debian's libgloo-dev) nor "
                  "NCCL (a CUDA LibTorch and nccl.h) was found at configure time; run one process, or rebuild with one of them");
}

DataParallel::DataParallel(const World&, const std::string&, c10::Device, std::chrono::seconds, std::vector<at::Tensor>) {
  throw UserError("WORLD_SIZE > 1: this build of trainc has no process group: neither gloo (Debian's libgloo-dev) nor NCCL (a CUDA "
                  "LibTorch and nccl.h) was found at configure time; run one process, or rebuild with one of them");
}
DataParallel::~DataParallel() = default;
void DataParallel::broadcast(std::vector<at::Tensor>&) {}
void DataParallel::expect_gradients() {}
void DataParallel::finish_gradients() {}
at::Tensor DataParallel::mean(const at::Tensor& value) { return value; }
std::vector<at::Tensor> DataParallel::all_gather(const at::Tensor& tensor) { return {tensor}; }
int DataParallel::agree_on_signal(int signal_number) { return signal_number; }
void DataParallel::barrier() {}
void DataParallel::close() {}

#endif

}  // namespace trainc
