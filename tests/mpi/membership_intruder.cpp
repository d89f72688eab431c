// An attacker on a keyed run's rendezvous, for tests/mpi/run_door_attacks.sh.
//   membership_intruder hijack RUN GENERATION SECONDS
//     publishes the plain door name of GENERATION (anyone reaching the name
//     server can) at its own TCP door and, for SECONDS, answers every knock
//     with a challenge made without the key; prints the name in each hello.
//   membership_intruder silent RUN COUNT SECONDS
//     opens COUNT connections to the run's door 0 (its plain name) and says
//     nothing on them for SECONDS (a slow or hostile client).
//   membership_intruder relay PORT_FILE SECONDS
//     plays a relay of a newcomer's join handshake that learned the port the
//     door handed out (written to PORT_FILE): connects to it first, answers
//     whatever the group asks on the connection without the key, and tries
//     to merge. Prints "intruder MERGED" if it gets in (it must not); exits
//     5 when SECONDS pass without it.
#include <mpi.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "comm/door_socket.h"
#include "comm/membership.h"
#include "comm/message_auth.h"

using namespace diloco::comm;

namespace {

void give_up(int) {
  const char line[] = "intruder: not merged\n";
  (void)!write(1, line, sizeof line - 1);
  _exit(5);
}

int hijack(const std::string& run, int generation, double seconds) {
  DoorListener door;
  const std::string name = "diloco-" + run + "-door-" + std::to_string(generation);
  if (MPI_Publish_name(name.c_str(), MPI_INFO_NULL, door.endpoint().c_str()) != MPI_SUCCESS) return 1;
  std::printf("intruder: published %s\n", name.c_str());
  std::fflush(stdout);
  const auto start = std::chrono::steady_clock::now();
  while (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < seconds) {
    DoorSocket knock = door.accept(0.5);
    std::string hello;
    if (!knock.open() || !knock.receive(hello, 3.0) || hello.empty()) continue;
    std::string who = "?";
    try {
      who = decode_hello(hello.substr(1)).name;
    } catch (const JoinError&) {
    }
    std::printf("intruder: hello from %s\n", who.c_str());
    std::fflush(stdout);
    std::string challenge(1, 'C');  // a nonce and a "proof" made without the key
    challenge += MessageAuth::random_bytes(64);
    knock.send(challenge);
    std::string answer;
    knock.receive(answer, 3.0);
  }
  MPI_Unpublish_name(name.c_str(), MPI_INFO_NULL, door.endpoint().c_str());
  return 0;
}

int silent(const std::string& run, int count, double seconds) {
  char endpoint[MPI_MAX_PORT_NAME] = {0};
  const std::string name = "diloco-" + run + "-door-0";
  if (MPI_Lookup_name(name.c_str(), MPI_INFO_NULL, endpoint) != MPI_SUCCESS) return 1;
  std::vector<DoorSocket> held;
  for (int i = 0; i < count; ++i) {
    held.push_back(DoorSocket::connect(endpoint, 2.0));
    if (!held.back().open()) return 1;
  }
  std::printf("intruder: %d silent connections open\n", count);
  std::fflush(stdout);
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  return 0;
}

int relay(const std::string& port_file, double seconds) {
  signal(SIGALRM, give_up);
  alarm(static_cast<unsigned>(seconds));
  std::string port;
  while (port.empty()) {
    std::ifstream in(port_file);
    std::getline(in, port);
    if (port.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  MPI_Comm inter = MPI_COMM_NULL, merged = MPI_COMM_NULL;
  MPI_Comm_connect(port.c_str(), MPI_INFO_NULL, 0, MPI_COMM_SELF, &inter);
  std::printf("intruder: connected to the port\n");
  std::fflush(stdout);
  // Whatever the group asks on the connection, answered as well as one can
  // without the key.
  char nonce[32];
  MPI_Request request;
  MPI_Irecv(nonce, sizeof nonce, MPI_BYTE, 0, MPI_ANY_TAG, inter, &request);
  MPI_Status status;
  MPI_Wait(&request, &status);
  const std::string guess = MessageAuth::random_bytes(32);
  MPI_Send(guess.data(), 32, MPI_BYTE, 0, status.MPI_TAG, inter);
  MPI_Intercomm_merge(inter, 1, &merged);
  std::printf("intruder MERGED\n");
  std::fflush(stdout);
  _exit(0);
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "hijack" && argc == 5) {
    const int code = hijack(argv[2], std::atoi(argv[3]), std::atof(argv[4]));
    MPI_Finalize();
    return code;
  }
  if (mode == "silent" && argc == 5) {
    const int code = silent(argv[2], std::atoi(argv[3]), std::atof(argv[4]));
    MPI_Finalize();
    return code;
  }
  if (mode == "relay" && argc == 4) return relay(argv[2], std::atof(argv[3]));
  std::fprintf(stderr, "usage: %s hijack RUN GENERATION SECONDS | silent RUN COUNT SECONDS | relay PORT_FILE SECONDS\n",
               argv[0]);
  return 2;
}
