#!/usr/bin/env bash
# Bounded fuzz pass over the NF fuzz targets (nfs/fuzz, cargo-fuzz + libFuzzer, nightly).
#   scripts/fuzz.sh [--time SECONDS] [--short] [TARGET...]
# Each target runs `cargo +nightly fuzz run T -- -max_total_time=SECONDS` on the committed corpus
# (nfs/fuzz/corpus/T, read only) plus a work corpus (nfs/fuzz/work/T, new inputs, not committed).
# A crash stops the pass: the input is in nfs/fuzz/artifacts/T/ (the command to reproduce it is
# printed; once fixed, add it to nfs/fuzz/corpus/T/ as a regression). Prints a table per target:
# executions, execs/s, coverage (edges), features, corpus size.
# --short (what `make test` runs): only if nightly and cargo-fuzz are already installed, else a
# note and exit 0; 2 s per target unless --time is given, on a debug build without sanitizer
# (builds in a third of the time; the long pass uses release + AddressSanitizer).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
say() { printf 'fuzz: %s\n' "$*" >&2; }

short=0; secs=""; targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --short) short=1 ;;
    --time) secs="${2:?--time needs seconds}"; shift ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    -*) say "unknown option $1"; exit 2 ;;
    *) targets+=("$1") ;;
  esac
  shift
done
[ -n "$secs" ] || secs=$([ $short = 1 ] && echo 2 || echo 60)
case "$secs" in ''|*[!0-9]*|0) say "--time must be a whole number of seconds > 0, not '$secs'"; exit 2 ;; esac

if ! cargo +nightly --version >/dev/null 2>&1; then
  if [ $short = 1 ]; then say "SKIP: no nightly Rust toolchain (the corpora still run in cargo test)"; exit 0; fi
  say "needs a nightly Rust toolchain for cargo-fuzz: rustup toolchain install nightly --profile minimal"
  exit 1
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
  if [ $short = 1 ]; then say "SKIP: cargo-fuzz not installed, scripts/setup.sh fuzz (the corpora still run in cargo test)"; exit 0; fi
  say "cargo-fuzz is not installed: run scripts/setup.sh fuzz (cargo install cargo-fuzz --locked)"
  exit 1
fi

# cargo-fuzz finds the fuzz crate as ./fuzz of the project it runs in.
cd "$root/nfs"
all=$(sed -n 's/^name = "\(.*\)"$/\1/p' fuzz/Cargo.toml | grep -v '^nf-fuzz$')
[ ${#targets[@]} -gt 0 ] || mapfile -t targets <<<"$all"
for t in "${targets[@]}"; do
  grep -qx "$t" <<<"$all" || { say "unknown target '$t' (one of: $(echo $all))"; exit 2; }
done

# One build of all targets: release + debug assertions + AddressSanitizer (cargo-fuzz defaults),
# or for --short a debug build without sanitizer.
if [ $short = 1 ]; then build=(--dev -s none); else build=(-O); fi
say "building the fuzz targets (cargo +nightly fuzz build ${build[*]})"
mkdir -p fuzz/work
if ! cargo +nightly fuzz build "${build[@]}" >fuzz/work/build.log 2>&1; then
  tail -30 fuzz/work/build.log >&2; say "build failed (log: nfs/fuzz/work/build.log)"; exit 1
fi

printf '%-12s %5s %10s %8s %6s %6s %6s\n' target secs execs execs/s cov ft corpus
for t in "${targets[@]}"; do
  mkdir -p "fuzz/work/$t" "fuzz/artifacts/$t"
  log="fuzz/work/$t.log"
  if ! cargo +nightly fuzz run "${build[@]}" "$t" "fuzz/work/$t" "fuzz/corpus/$t" -- \
      -max_total_time="$secs" -print_final_stats=1 >"$log" 2>&1; then
    grep -av "^#[0-9]" "$log" | tail -40 >&2
    art=$(ls -t "fuzz/artifacts/$t"/* 2>/dev/null | head -n1 || true)
    say "target $t FAILED; input: nfs/${art:-fuzz/artifacts/$t/}"
    say "reproduce: (cd nfs && cargo +nightly fuzz run ${build[*]} $t ${art:-fuzz/artifacts/$t/INPUT})"
    exit 1
  fi
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n1)
  done_line=$(grep -aE '^#[0-9]+[[:space:]]+DONE' "$log" | tail -n1 || true)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$done_line")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$done_line")
  corp=$(sed -n 's/.* corp: \([0-9]*\).*/\1/p' <<<"$done_line")
  printf '%-12s %5s %10s %8s %6s %6s %6s\n' "$t" "$secs" "${execs:-?}" "${rate:-?}" "${cov:-?}" "${ft:-?}" "${corp:-?}"
done
