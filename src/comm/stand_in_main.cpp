// diloco-stand-in PORT SECONDS: launched by a group's keeper to connect in
// the place of a newcomer that died between its "ready" and its connect
// (comm/accept_stand_in.h).
#include "comm/accept_stand_in.h"

int main(int argc, char** argv) { return diloco::comm::run_stand_in(argc, argv); }
