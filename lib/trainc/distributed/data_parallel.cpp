#include "trainc/distributed/data_parallel.h"

#include <signal.h>
#include <unistd.h>

#include <fstream>

#include "trainc/common/error.h"

#if TRAINC_WITH_GLOO
#ifndef USE_C10D_GLOO  // the gloo declarations of c10d's header are behind it
#define USE_C10D_GLOO
#endif
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#endif

namespace trainc {

#if TRAINC_WITH_GLOO

namespace {

constexpr int64_t kBucketBytes = 25 * 1024 * 1024;

std::string hostname() {
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  return name;
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

struct DataParallel::Impl {
  World world;
  std::chrono::seconds timeout;
  c10::intrusive_ptr<c10d::TCPStore> store;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> group;

  // Runs one collective; a failure names the ranks of this host whose process is gone.
  template <typename Collective>
  void run(const std::string& what, Collective collective) {
    try {
      auto work = collective();
      work->wait(std::chrono::duration_cast<std::chrono::milliseconds>(timeout));
    } catch (const std::exception& error) {
      throw UserError("rank " + std::to_string(world.rank) + ": " + what + " failed: " + missing_ranks() + " (" +
                          std::string(error.what()).substr(0, 300) + ")",
                      kExitFailure);
    }
  }

  // Each rank publishes host and pid at start; a rank whose pid is gone on this host has died.
  std::string missing_ranks() {
    std::vector<std::string> gone;
    try {
      for (int rank = 0; rank < world.size; ++rank) {
        if (rank == world.rank) continue;
        const std::vector<uint8_t> bytes = store->get("trainc/process/" + std::to_string(rank));
        const std::string text(bytes.begin(), bytes.end());
        const auto colon = text.rfind(':');
        if (text.substr(0, colon) == hostname() && !process_alive(std::stoi(text.substr(colon + 1)))) gone.push_back(std::to_string(rank));
      }
    } catch (const std::exception&) {
      return "rank 0, which hosts the rendezvous store, is unreachable: it has probably died";
    }
    if (gone.empty()) return "a rank on another host died, hung past ddp_timeout, or left the run";
    return "rank" + std::string(gone.size() > 1 ? "s " : " ") + [&] {
      std::string list;
      for (const std::string& rank : gone) list += (list.empty() ? "" : ", ") + rank;
      return list;
    }() + " died";
  }
};

DataParallel::DataParallel(const World& world, const std::string& backend, std::chrono::seconds timeout)
    : impl_(std::make_unique<Impl>()) {
  if (backend != "gloo") {
    throw UserError("ddp_backend: " + backend + ": this build of trainc runs data-parallel training over gloo only; set "
                    "ddp_backend: gloo");
  }
  impl_->world = world;
  impl_->timeout = timeout;
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
    auto group_options = c10d::ProcessGroupGloo::Options::create(std::chrono::duration_cast<std::chrono::milliseconds>(timeout));
    group_options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(world.master_addr == "localhost" ? "127.0.0.1"
                                                                                                                     : world.master_addr));
    impl_->group = c10::make_intrusive<c10d::ProcessGroupGloo>(impl_->store, world.rank, world.size, group_options);
  } catch (const UserError&) {
    throw;
  } catch (const std::exception& error) {
    throw UserError("rank " + std::to_string(world.rank) + ": rendezvous at MASTER_ADDR=" + world.master_addr +
                        " MASTER_PORT=" + std::to_string(world.master_port) + " failed within ddp_timeout (" +
                        std::to_string(timeout.count()) + " s): " + std::string(error.what()).substr(0, 300),
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

void DataParallel::average_gradients(const std::vector<at::Tensor>& parameters) {
  std::vector<at::Tensor> grads;
  for (const at::Tensor& parameter : parameters) {
    if (parameter.grad().defined()) grads.push_back(parameter.grad());
  }
  std::size_t first = 0;
  while (first < grads.size()) {
    std::size_t last = first;
    int64_t bytes = 0;
    while (last < grads.size() && (last == first || bytes + grads[last].nbytes() <= kBucketBytes) &&
           grads[last].scalar_type() == grads[first].scalar_type()) {
      bytes += static_cast<int64_t>(grads[last].nbytes());
      ++last;
    }
    std::vector<at::Tensor> flat_parts;
    for (std::size_t i = first; i < last; ++i) flat_parts.push_back(grads[i].reshape({-1}));
    std::vector<at::Tensor> bucket = {at::cat(flat_parts)};
    impl_->run("all-reducing gradients", [&] { return impl_->group->allreduce(bucket); });
    bucket[0].div_(impl_->world.size);
    int64_t offset = 0;
    for (std::size_t i = first; i < last; ++i) {
      const int64_t count = grads[i].numel();
      grads[i].copy_(bucket[0].narrow(0, offset, count).view(grads[i].sizes()));
      offset += count;
    }
    first = last;
  }
}

at::Tensor DataParallel::mean(const at::Tensor& value) {
  std::vector<at::Tensor> one = {value.detach().to(at::kDouble).clone().reshape({1})};
  impl_->run("averaging the logged loss", [&] { return impl_->group->allreduce(one); });
  return (one[0] / impl_->world.size).reshape({});
}

bool DataParallel::any(bool value) {
  std::vector<at::Tensor> one = {at::full({1}, value ? 1 : 0, at::kInt)};
  impl_->run("agreeing on a stop", [&] { return impl_->group->allreduce(one); });
  return one[0].item<int>() > 0;
}

void DataParallel::barrier() {
  impl_->run("waiting for every rank", [&] { return impl_->group->barrier(); });
}

#else

struct DataParallel::Impl {};

DataParallel::DataParallel(const World&, const std::string&, std::chrono::seconds) {
  throw UserError("WORLD_SIZE > 1: this build of trainc has no gloo (Debian's libgloo-dev, found at configure time); "
                  "run one process, or rebuild with libgloo-dev installed");
}
DataParallel::~DataParallel() = default;
void DataParallel::broadcast(std::vector<at::Tensor>&) {}
void DataParallel::average_gradients(const std::vector<at::Tensor>&) {}
at::Tensor DataParallel::mean(const at::Tensor& value) { return value; }
bool DataParallel::any(bool value) { return value; }
void DataParallel::barrier() {}

#endif

}  // namespace trainc
