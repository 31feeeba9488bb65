#!/usr/bin/env bash
# Install what is missing, and nothing else: idempotent and quiet when all is there.
#   scripts/setup.sh [all|apt|python|java|rust|cross|fuzz]...
# (fuzz is not part of all: the nightly toolchain and cargo-fuzz for `make fuzz`)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
say() { printf 'setup: %s\n' "$*" >&2; }

setup_apt() {
  local missing=()
  while read -r pkg; do
    pkg="${pkg%%#*}"; pkg="${pkg// /}"
    [ -n "$pkg" ] || continue
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "ok installed" || missing+=("$pkg")
  done < deps/apt.txt
  [ ${#missing[@]} -eq 0 ] && return 0
  say "installing Debian packages: ${missing[*]}"
  if [ "$(id -u)" -ne 0 ]; then say "need root to install: ${missing[*]}"; exit 1; fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  # The packages ship system services; UNO runs private instances only.
  for svc in openvswitch-switch redis-server; do
    systemctl disable --now "$svc" >/dev/null 2>&1 || true
    service "$svc" stop >/dev/null 2>&1 || true
  done
}

setup_python() {
  local py="${PYTHON:-python3.11}"
  command -v "$py" >/dev/null || py=python3
  if [ ! -x .venv/bin/python ]; then
    say "creating Python environment .venv"
    "$py" -m venv .venv
    .venv/bin/pip install -q --upgrade pip >/dev/null
  fi
  if [ ! -f .venv/.uno-installed ] || [ pyproject.toml -nt .venv/.uno-installed ]; then
    say "installing Python packages into .venv"
    .venv/bin/pip install -q -e '.[dev]' >/dev/null
    touch .venv/.uno-installed
  fi
}

setup_java() {
  [ -f pom.xml ] || return 0
  mkdir -p .stamps
  local jar
  jar=$(ls oneswitch/target/oneswitch-*-all.jar 2>/dev/null | head -n1 || true)
  if [ -z "$jar" ] || [ -n "$(find oneswitch/src pom.xml oneswitch/pom.xml -newer "$jar" -print -quit 2>/dev/null)" ]; then
    say "building OneSwitch (Maven)"
    mvn -q -B -DskipTests package >/dev/null
  fi
}

setup_rust() {
  compgen -G 'nfs/crates/*/Cargo.toml' >/dev/null || return 0
  if [ ! -x nfs/target/release/nf ] || [ -n "$(find nfs -path nfs/target -prune -o -newer nfs/target/release/nf -type f -print -quit 2>/dev/null)" ]; then
    say "building NFs (Cargo, release)"
    (cd nfs && cargo build -q --release --workspace)
  fi
}

setup_cross() {
  # Best effort: the sNIC bundle's `nf` for a BlueField's Arm cores (uno snic bundle --arch aarch64). Without
  # it the bundle says how to build `nf` on or for the DPU, and its tests check that instead.
  if ! command -v aarch64-linux-gnu-gcc >/dev/null 2>&1 && [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
    say "installing the aarch64 cross linker (gcc-aarch64-linux-gnu)"
    export DEBIAN_FRONTEND=noninteractive
    { apt-get install -y -qq --no-install-recommends gcc-aarch64-linux-gnu >/dev/null 2>&1 \
      || { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq --no-install-recommends gcc-aarch64-linux-gnu >/dev/null 2>&1; }; } \
      || say "gcc-aarch64-linux-gnu not installed: the sNIC bundle will not include an aarch64 nf"
  fi
  # Its C library is only a recommendation of the linker's package: without it nothing links.
  if command -v aarch64-linux-gnu-gcc >/dev/null 2>&1 && [ "$(aarch64-linux-gnu-gcc -print-file-name=Scrt1.o)" = Scrt1.o ] \
    && [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
    say "installing the aarch64 C library for the cross linker (libc6-dev-arm64-cross)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends libc6-dev-arm64-cross >/dev/null 2>&1 \
      || say "libc6-dev-arm64-cross not installed: the sNIC bundle will not include an aarch64 nf"
  fi
  if command -v rustup >/dev/null 2>&1 && ! rustup target list --installed 2>/dev/null | grep -qx aarch64-unknown-linux-gnu; then
    say "adding the Rust target aarch64-unknown-linux-gnu"
    rustup target add aarch64-unknown-linux-gnu >/dev/null 2>&1 \
      || say "Rust target aarch64-unknown-linux-gnu not added: the sNIC bundle will not include an aarch64 nf"
  fi
  return 0
}

setup_fuzz() {
  # cargo-fuzz drives libFuzzer with sanitizers, which need a nightly toolchain.
  if ! cargo +nightly --version >/dev/null 2>&1; then
    say "cargo-fuzz needs a nightly Rust toolchain: rustup toolchain install nightly --profile minimal"
    exit 1
  fi
  if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
    say "installing cargo-fuzz (cargo install cargo-fuzz --locked)"
    cargo install -q cargo-fuzz --locked
  fi
}

parts=("$@")
[ ${#parts[@]} -eq 0 ] && parts=(all)
for part in "${parts[@]}"; do
  case "$part" in
    all) setup_apt; setup_python; setup_java; setup_rust; setup_cross ;;
    apt) setup_apt ;;
    python) setup_python ;;
    java) setup_java ;;
    rust) setup_rust ;;
    cross) setup_cross ;;
    fuzz) setup_fuzz ;;
    *) say "unknown part '$part' (all|apt|python|java|rust|cross|fuzz)"; exit 2 ;;
  esac
done
