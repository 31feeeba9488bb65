#!/usr/bin/env bash
# Build the nf binary as version VERSION and put it in the versions directory (DIR/VERSION/nf, default
# nfs/versions), where `POST /v1/nfs/ID/update {"version": VERSION}` finds it. The checkout's own build
# (nfs/target/release/nf) is rebuilt as it was afterwards.
#   scripts/nf-version.sh VERSION [DIR]
# Extra build-time knobs pass through the environment (nfs/crates/nf/src/version.rs), e.g.
# UNO_NF_TEST_STATE_LAYOUT=2 for a version declaring a state layout the others cannot read (tests).
set -euo pipefail
version=${1:?usage: scripts/nf-version.sh VERSION [DIR]}
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${2:-$root/nfs/versions}
[[ $version =~ ^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$ ]] || { echo "bad version: $version" >&2; exit 2; }
cd "$root/nfs"
UNO_NF_VERSION=$version cargo build -q --release -p nf --bin nf
mkdir -p "$dir/$version"
cp target/release/nf "$dir/$version/nf.tmp" && mv "$dir/$version/nf.tmp" "$dir/$version/nf"
env -u UNO_NF_TEST_STATE_LAYOUT cargo build -q --release -p nf --bin nf
"$dir/$version/nf" --state-schema
