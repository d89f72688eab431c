# The overlap paths under ThreadSanitizer: builds the communication-thread
# unit test and the trainer's multi-rank tests with -fsanitize=thread in
# their own build tree (build-tsan/), then runs the thread tests and the
# overlap modes (delayed, streaming) under mpirun. Open MPI, libtorch and
# OpenBLAS are not instrumented: memory effects of MPI calls are left
# untracked (DILOCO_MPI_CHECK, see mpi_communicator.h) and
# tests/tsan/suppressions.txt silences what the libraries report of
# themselves, nothing of this project. A canary race must be reported first.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${TSAN_BUILD_DIR:-build-tsan}
# -O1 -g1: line tables are all a report needs; with -O2 -g the torch-heavy
# sources took half again as long to compile (279 s against 185 s cold on 2 cores).
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=None \
  -DCMAKE_CXX_FLAGS="-O1 -g1 -fsanitize=thread -fno-omit-frame-pointer" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=thread" -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=thread" > /dev/null
cmake --build "$build" -j "$(nproc)" --target topology_test mpi_trainer_test > /dev/null
export TSAN_OPTIONS="suppressions=$PWD/tests/tsan/suppressions.txt halt_on_error=1"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
"$build/tests/topology_test" --gtest_filter='CommThread*'
# The canary: a deliberate race must be reported, or this build sees nothing.
if "$build/tests/topology_test" --gtest_filter='CommThreadTest.DISABLED_Canary*' --gtest_also_run_disabled_tests \
    > "$build/canary.log" 2>&1 || ! grep -q "ThreadSanitizer: data race" "$build/canary.log"; then
  echo "ThreadSanitizer did not report the canary race"; cat "$build/canary.log"; exit 1
fi
for n in 2 3; do
  ${MPIRUN:-mpirun} -np "$n" --oversubscribe --bind-to none "$build/tests/mpi_trainer_test" --gtest_filter='TrainerOverlap*'
done
echo "ThreadSanitizer: no data race in the overlap tests"
