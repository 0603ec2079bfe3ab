#include "trainc/distributed/world.h"

#include <cstdlib>

#include "trainc/common/error.h"

namespace trainc {
namespace {

int integer_variable(const char* name, int low, int high, const std::string& expected) {
  const char* text = std::getenv(name);
  if (text == nullptr) throw UserError(std::string(name) + " is not set; a distributed run (WORLD_SIZE > 1) needs " + expected);
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  if (*text == '\0' || *end != '\0' || value < low || value > high) {
    throw UserError(std::string(name) + "=" + text + ": expected " + expected);
  }
  return static_cast<int>(value);
}

}  // namespace

World world_from_environment() {
  World world;
  const char* size = std::getenv("WORLD_SIZE");
  if (size == nullptr || std::string(size) == "1") {
    // A rank other than 0 of one process is a launcher's mistake (or a stale variable), not a run to start.
    if (size != nullptr && std::getenv("RANK") != nullptr) integer_variable("RANK", 0, 0, "0, the only rank when WORLD_SIZE=1");
    return world;
  }
  world.size = integer_variable("WORLD_SIZE", 1, 1 << 20, "the number of processes, an integer >= 1");
  const std::string below_size = "an integer from 0 to " + std::to_string(world.size - 1);
  world.rank = integer_variable("RANK", 0, world.size - 1, below_size + " (this process's rank)");
  world.local_rank = std::getenv("LOCAL_RANK") != nullptr ? integer_variable("LOCAL_RANK", 0, world.size - 1, below_size) : world.rank;
  const char* addr = std::getenv("MASTER_ADDR");
  if (addr == nullptr || *addr == '\0') throw UserError("MASTER_ADDR is not set; a distributed run needs the host of rank 0");
  world.master_addr = addr;
  world.master_port = integer_variable("MASTER_PORT", 1, 65535, "a TCP port from 1 to 65535");
  return world;
}

std::vector<int64_t> rank_share(std::vector<int64_t> order, const World& world) {
  if (!world.distributed()) return order;
  const std::size_t size = static_cast<std::size_t>(world.size);
  const std::size_t padded = (order.size() + size - 1) / size * size;
  for (std::size_t i = 0; order.size() < padded; ++i) order.push_back(order[i]);
  std::vector<int64_t> share;
  for (std::size_t i = static_cast<std::size_t>(world.rank); i < order.size(); i += size) share.push_back(order[i]);
  return share;
}

}  // namespace trainc
