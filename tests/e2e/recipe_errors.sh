# Each recipe error class exits 2 with a message naming the key (and file:line);
# under mpirun every rank exits and nothing hangs.
source "$(dirname "$0")/lib.sh"

bad() {  # bad NAME NEEDLE TOML
  printf '%s\n' "$3" > "$WORK/$1.toml"
  expect_exit 2 "$2" "$1" -- "$DILOCO_BIN" check "$WORK/$1.toml"
}

bad unknown_key "$WORK/unknown_key.toml:2:17: unknown key 'outer.learning_rate'" $'[outer]\nlearning_rate = 0.1'
bad unknown_section "unknown section [optimizer]" $'[optimizer]\nlr = 1'
bad wrong_type "sync.H must be an integer" $'[sync]\nH = "ten"'
bad out_of_range "outer.lr must be > 0" $'[outer]\nlr = -1.0'
bad bad_choice "outer.optimizer must be one of" $'[outer]\noptimizer = "adam"'
bad bad_codec "compression.codec must be one of" $'[compression]\ncodec = "gzip"'
bad syntax "syntax.toml:2" $'[run]\nseed = = 1'
bad cross_key "model.n_heads must divide model.d_model" $'[model]\nd_model = 30\nn_heads = 4'
expect_exit 2 "cannot open recipe" "missing recipe file" -- "$DILOCO_BIN" check "$WORK/nope.toml"
expect_exit 2 "recipe: recipes: is a folder, not a recipe file" "a folder as the recipe" -- "$DILOCO_BIN" check recipes
expect_exit 2 "data: data path $WORK/missing does not exist" "check: missing data path" -- \
  "$DILOCO_BIN" check recipes/quickstart.toml --set "data.paths=[\"$WORK/missing\"]"
mkdir -p "$WORK/no_text" && printf '\0\1\2' > "$WORK/no_text/binary.bin"
expect_exit 2 "data: no plain-text files under $WORK/no_text" "check: a folder with no text" -- \
  "$DILOCO_BIN" check recipes/quickstart.toml --set "data.paths=[\"$WORK/no_text\"]"
expect_exit 2 "--set outer.nope" "unknown --set key" -- "$DILOCO_BIN" check recipes/quickstart.toml --set outer.nope=1
expect_exit 2 "--set topology.sites: topology.sites must be an integer" "--set wrong type" -- \
  "$DILOCO_BIN" check recipes/quickstart.toml --set topology.sites=two

# Under mpirun: a bad recipe stops all ranks with exit 2 and one message.
start=$(date +%s)
expect_exit 2 "outer.momentum must be in [0, 1)" "mpirun bad recipe" -- \
  mpi 2 "$DILOCO_BIN" train recipes/quickstart.toml --set outer.momentum=1.5 --out "$WORK/run1"
# More sites than ranks is only known at launch: still exit 2, naming the key.
expect_exit 2 "topology.sites = 3 needs at least that many ranks" "mpirun sites > ranks" -- \
  mpi 2 "$DILOCO_BIN" train recipes/quickstart.toml --set topology.sites=3 --out "$WORK/run2"
# A data path that does not exist is bad input too.
expect_exit 2 "data: data path /nonexistent/corpus does not exist" "mpirun missing corpus" -- \
  mpi 2 "$DILOCO_BIN" train recipes/quickstart.toml --set 'data.paths=["/nonexistent/corpus"]' --out "$WORK/run3"
# Empty data file, a folder without text, an output folder that cannot be made.
: > "$WORK/empty.txt"
expect_exit 2 "data file $WORK/empty.txt is empty" "empty data file" -- \
  mpi 2 "$DILOCO_BIN" train recipes/quickstart.toml --set "data.paths=[\"$WORK/empty.txt\"]" --out "$WORK/run4"
mkdir -p "$WORK/binary_only"; printf '\0\1\2' > "$WORK/binary_only/x.dat"
expect_exit 2 "no plain-text files under $WORK/binary_only" "folder without text" -- \
  mpi 2 "$DILOCO_BIN" train recipes/quickstart.toml --set "data.paths=[\"$WORK/binary_only\"]" --out "$WORK/run5"
: > "$WORK/a_file"
expect_exit 2 "run.out_dir: cannot write to $WORK/a_file/out" "unwritable out dir" -- \
  mpi 2 "$DILOCO_BIN" train recipes/quickstart.toml --out "$WORK/a_file/out"
# Data keys a format has no use for, and a format without what it needs.
expect_exit 2 'data.format must be one of "bytes", "tokens", "text"' "unknown data format" -- \
  "$DILOCO_BIN" check recipes/quickstart.toml --set data.format=parquet
expect_exit 2 'data.token_dtype applies to data.format = "tokens" only' "token_dtype with bytes" -- \
  "$DILOCO_BIN" check recipes/quickstart.toml --set data.token_dtype=uint16
expect_exit 2 'data.tokenizer applies to data.format = "text" only' "tokenizer with bytes" -- \
  "$DILOCO_BIN" check recipes/quickstart.toml --set data.tokenizer=m.model
expect_exit 2 'data.format = "text" needs data.tokenizer' "text without a tokenizer" -- \
  "$DILOCO_BIN" check recipes/quickstart.toml --set data.format=text
# Keys added with the schedules, overlap and launch work.
expect_exit 2 "debug.slow_site names site 2; sites are 0..1" "slow site outside the sites" -- \
  "$DILOCO_BIN" check recipes/quickstart.toml --set debug.slow_site=2
expect_exit 2 "debug.slow_factor must be in [1, 1000]" "slow factor below 1" -- \
  "$DILOCO_BIN" check recipes/quickstart.toml --set debug.slow_factor=0.5
expect_exit 2 'topology.site_by must be one of "block", "node"' "unknown site_by" -- \
  "$DILOCO_BIN" check recipes/quickstart.toml --set topology.site_by=rack
expect_exit 2 'sync.overlap must be one of "none", "delayed", "streaming"' "unknown overlap mode" -- \
  "$DILOCO_BIN" check recipes/quickstart.toml --set sync.overlap=eager
expect_exit 2 'sync.schedule must be one of "fixed", "overhead", "time-budget"' "unknown schedule" -- \
  "$DILOCO_BIN" check recipes/quickstart.toml --set sync.schedule=budget
expect_exit 2 "sync.mix_alpha must be in [0, 1)" "mix alpha of 1" -- \
  "$DILOCO_BIN" check recipes/quickstart.toml --set sync.mix_alpha=1.0
elapsed=$(( $(date +%s) - start ))
[[ $elapsed -lt 120 ]] && pass "no hang ($elapsed s)" || fail "mpirun error cases took $elapsed s"
finish
