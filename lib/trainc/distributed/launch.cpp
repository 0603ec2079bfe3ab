#include "trainc/distributed/launch.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

#include "trainc/common/error.h"

namespace trainc {
namespace {

std::vector<pid_t> workers;

void forward_signal(int signal_number) {
  for (pid_t pid : workers) {
    if (pid > 0) kill(pid, signal_number);
  }
}

std::string describe_status(int status) {
  if (WIFSIGNALED(status)) return "was killed by signal " + std::to_string(WTERMSIG(status));
  return "exited with code " + std::to_string(WEXITSTATUS(status));
}

}  // namespace

int free_local_port() {
  const int socket_fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  socklen_t length = sizeof(address);
  if (socket_fd < 0 || bind(socket_fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      getsockname(socket_fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    throw UserError(std::string("--nproc-per-node: cannot find a free local port: ") + std::strerror(errno), kExitFailure);
  }
  close(socket_fd);
  return ntohs(address.sin_port);
}

int launch_local_workers(int nproc, const std::vector<std::string>& arguments) {
  const std::string port = std::to_string(free_local_port());
  std::vector<std::string> argv_text = {"trainc"};
  argv_text.insert(argv_text.end(), arguments.begin(), arguments.end());
  std::fflush(stdout);
  std::fflush(stderr);
  workers.assign(static_cast<std::size_t>(nproc), -1);
  for (int rank = 0; rank < nproc; ++rank) {
    const pid_t pid = fork();
    if (pid < 0) throw UserError(std::string("--nproc-per-node: fork failed: ") + std::strerror(errno), kExitFailure);
    if (pid == 0) {
      setpgid(0, 0);  // a terminal's Ctrl-C reaches the launcher alone, which passes it on once
      setenv("RANK", std::to_string(rank).c_str(), 1);
      setenv("LOCAL_RANK", std::to_string(rank).c_str(), 1);
      setenv("WORLD_SIZE", std::to_string(nproc).c_str(), 1);
      setenv("MASTER_ADDR", "127.0.0.1", 1);
      setenv("MASTER_PORT", port.c_str(), 1);
      std::vector<char*> argv;
      for (std::string& text : argv_text) argv.push_back(text.data());
      argv.push_back(nullptr);
      execv("/proc/self/exe", argv.data());
      std::fprintf(stderr, "error: --nproc-per-node: cannot start rank %d: %s\n", rank, std::strerror(errno));
      _exit(kExitFailure);
    }
    workers[static_cast<std::size_t>(rank)] = pid;
  }
  signal(SIGINT, forward_signal);
  signal(SIGTERM, forward_signal);

  int exit_code = kExitOk;
  int running = nproc;
  // Workers still running 30 s after the first failure may be blocked on the failed one: killed.
  auto kill_at = std::chrono::steady_clock::time_point::max();
  bool killed = false;
  while (running > 0) {
    int status = 0;
    const pid_t pid = waitpid(-1, &status, exit_code == kExitOk ? 0 : WNOHANG);
    if (pid < 0 && errno == EINTR) continue;
    if (pid <= 0) {
      if (!killed && std::chrono::steady_clock::now() > kill_at) {
        forward_signal(SIGKILL);
        killed = true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      continue;
    }
    --running;
    for (std::size_t rank = 0; rank < workers.size(); ++rank) {
      if (workers[rank] != pid) continue;
      workers[rank] = -1;
      const bool failed = !WIFEXITED(status) || WEXITSTATUS(status) != 0;
      if (!failed) break;
      std::fprintf(stderr, "error: rank %zu (pid %d) %s\n", rank, pid, describe_status(status).c_str());
      if (exit_code == kExitOk) {
        exit_code = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
        kill_at = std::chrono::steady_clock::now() + std::chrono::seconds(30);
      }
    }
  }
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  return exit_code;
}

}  // namespace trainc
