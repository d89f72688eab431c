// The stand-in for a newcomer that never connects (accept_stand_in.h).
#include "comm/accept_stand_in.h"

#include <mpi.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <vector>

#include "comm/membership_wire.h"

extern char** environ;

namespace diloco::comm {

namespace {

// What the stand-in's mpirun inherits: not the variables of this job (its
// rank, its daemon, its PMIx server: a child mpirun that saw them would
// take itself for a rank of this job), but what an operator sets for any
// job: running as root, and the transports' settings.
bool inherited(const std::string& var) {
  for (const char* prefix : {"PMIX_", "OPAL_", "ORTE_", "OMPI_"})
    if (var.rfind(prefix, 0) == 0) {
      for (const char* kept : {"OMPI_ALLOW_RUN_AS_ROOT", "OMPI_MCA_btl", "OMPI_MCA_oob", "OMPI_MCA_rmaps_base_"})
        if (var.rfind(kept, 0) == 0) return true;
      return false;
    }
  return true;
}

// Reaps a launched process whenever it ends (a detached thread of its own).
void reap(pid_t pid) {
  std::thread([pid] {
    int status = 0;
    waitpid(pid, &status, 0);
  }).detach();
}

}  // namespace

std::string stand_in_program() {
  if (const char* set = std::getenv("DILOCO_STAND_IN")) return set;
  std::error_code error;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", error);
  if (error) return "";
  for (const auto& dir : {self.parent_path(), self.parent_path().parent_path()}) {
    const auto candidate = dir / "diloco-stand-in";
    if (std::filesystem::exists(candidate, error)) return candidate.string();
  }
  return "";
}

AcceptStandIn::AcceptStandIn(const DoorSocket* newcomer, std::string port, double patience_s)
    : port_(std::move(port)) {
  if (!newcomer) return;
  watcher_ = std::thread([this, newcomer, patience_s] {
    const auto start = wire::Clock::now();
    while (!done_) {
      if (newcomer->peer_gone()) return launch("its door connection closed");
      if (wire::since(start) > patience_s) return launch("it did not connect within sync.timeout_s");
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
}

AcceptStandIn::~AcceptStandIn() {
  done_ = true;
  if (watcher_.joinable()) watcher_.join();
}

std::string AcceptStandIn::why() const {
  const char* why = why_;
  return why ? why : "";
}

void AcceptStandIn::launch(const char* why) {
  why_ = why;
  const std::string program = stand_in_program();
  const char* server = std::getenv("OMPI_MCA_pmix_server_uri");
  if (program.empty() || !server) {
    std::fprintf(stderr, "diloco: the newcomer being admitted is gone (%s), and no stand-in can take its place "
                 "(%s); the accept's guard will end this site\n", why,
                 program.empty() ? "diloco-stand-in not found: set DILOCO_STAND_IN" : "no ompi-server");
    return;
  }
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e)
    if (inherited(*e)) env.emplace_back(*e);
  const std::string seconds = std::to_string(static_cast<int>(wire::kStandInS));
  std::vector<std::string> args = {"mpirun", "--ompi-server", server, "-np", "1", "--bind-to", "none",
                                   program, port_, seconds};
  std::vector<char*> argv, envp;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_t pid = 0;
  if (const int rc = posix_spawnp(&pid, "mpirun", nullptr, nullptr, argv.data(), envp.data()); rc != 0) {
    std::fprintf(stderr, "diloco: could not launch the stand-in's mpirun (error %d); the accept's guard will end "
                 "this site\n", rc);
    return;
  }
  std::fprintf(stderr, "diloco: the newcomer being admitted is gone (%s): a stand-in connects in its place\n", why);
  reap(pid);
}

int run_stand_in(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s PORT SECONDS (launched by a group's keeper, not by hand)\n", argv[0]);
    return 2;
  }
  alarm(static_cast<unsigned>(std::max(1, std::atoi(argv[2]))));  // whatever happens, it ends
  MPI_Init(&argc, &argv);
  MPI_Comm inter = MPI_COMM_NULL;
  if (MPI_Comm_connect(argv[1], MPI_INFO_NULL, 0, MPI_COMM_SELF, &inter) != MPI_SUCCESS) return 3;
  MPI_Comm_set_errhandler(inter, MPI_ERRORS_RETURN);
  // Anything but the proof the keeper asks for: it drops the connection.
  char marker = 'S';
  MPI_Send(&marker, 1, MPI_BYTE, 0, wire::kChannelTag, inter);
  MPI_Comm_free(&inter);
  MPI_Finalize();
  return 0;
}

}  // namespace diloco::comm
