// defines: World, world_from_environment, rank_share
//
// Which process of a data-parallel run this is, from the environment torchrun (and trainc's own
// --nproc-per-node launcher) sets: RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace trainc {

struct World {
  int rank = 0;
  int size = 1;
  int local_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  bool distributed() const { return size > 1; }
  bool is_main() const { return rank == 0; }
};

// Without WORLD_SIZE (or with 1): one process. Otherwise every variable must be present and valid;
// a missing or malformed one is a UserError (exit 2) naming it.
World world_from_environment();

// This rank's share of an epoch's sample order (all of it for one process), as torch's
// DistributedSampler shares it: padded with the order's first samples to a multiple of the world
// size, then rank r takes positions r, r + size, ... Batch k of all ranks together is then batch k
// of one process with size times the batch size.
std::vector<int64_t> rank_share(std::vector<int64_t> order, const World& world);

}  // namespace trainc
