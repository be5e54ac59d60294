#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz, clang with ASan + UBSan, assertions on, DSA_FUZZ=ON) into
# ${DSA_FUZZ_BUILD_DIR:-build-fuzz} and runs each for SECONDS (default 20; CI runs them from
# .ci/run). Usage: scripts/fuzz.sh [SECONDS] [TARGET...]   (targets: fuzz_config, ...)
# New inputs go to $build/corpus/<target> (the committed seeds in tests/fuzz/corpus/<target>
# are read, never written); a crash leaves its input in $build/artifacts/ and fails the run:
# minimise it (./fuzz_x -minimize_crash=1 FILE), fix the bug, and commit the input to
# tests/fuzz/corpus/<target>/ as a regression (test_fuzz replays every corpus file).
set -euo pipefail
export DSA_LOG_LEVEL=${DSA_LOG_LEVEL:-warn}  # the parsers' notes would flood the output
cd "$(dirname "$0")/.."
seconds=${1:-20}
shift || true
build=${DSA_FUZZ_BUILD_DIR:-build-fuzz}
scripts/install-deps.sh --fuzz
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
cmake -S . -B "$build" "${gen[@]}" -DDSA_FUZZ=ON -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_COMPILER=clang++ \
  >"$build.configure.log" 2>&1 || { cat "$build.configure.log"; exit 1; }
cmake --build "$build" -j "${DSA_JOBS:-$(nproc)}"
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for f in tests/fuzz/fuzz_*.cpp; do targets+=("$(basename "$f" .cpp)"); done
fi
mkdir -p "$build/artifacts"
failed=()
for t in "${targets[@]}"; do
  name=${t#fuzz_}
  mkdir -p "$build/corpus/$name"
  echo "fuzz: $t for ${seconds}s"
  # -timeout: one input taking > 10 s is a hang finding; -rss_limit_mb: unbounded memory is one too.
  if ! "$build/tests/fuzz/$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
      -dict=tests/fuzz/json.dict -artifact_prefix="$build/artifacts/$name-" \
      "$build/corpus/$name" "tests/fuzz/corpus/$name" >"$build/$t.log" 2>&1; then
    failed+=("$t")
    tail -n 60 "$build/$t.log"
  fi
  grep -E "stat::number_of_executed_units|stat::new_units_added|stat::peak_rss_mb" "$build/$t.log" | tr '\n' ' '
  echo
done
if [ ${#failed[@]} -ne 0 ]; then
  echo "fuzz: FINDINGS in ${failed[*]} (inputs in $build/artifacts/)" >&2
  exit 1
fi
echo "fuzz: no finding (${#targets[@]} targets, ${seconds}s each)"
