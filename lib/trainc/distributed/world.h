// defines: World, world_from_environment
//
// Which process of a data-parallel run this is, from the environment torchrun (and trainc's own
// --nproc-per-node launcher) sets: RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT.
#pragma once

#include <string>

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

}  // namespace trainc
