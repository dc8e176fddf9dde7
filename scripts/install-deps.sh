#!/usr/bin/env bash
# Installs every build and test dependency of tandem from Debian packages.
# Idempotent: packages already present are skipped. Needs root or sudo.
set -euo pipefail
pkgs=(
  build-essential cmake ninja-build pkg-config
  libboost-dev libboost-system-dev
  capnproto libcapnp-dev
  libfmt-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libtomlplusplus-dev libcli11-dev nlohmann-json3-dev libxxhash-dev
  python3
  bsdutils                 # `script`: the progress-line test runs tandem under a pseudo-terminal
  clang libclang-rt-14-dev   # fuzz/ (libFuzzer, ASan, UBSan): scripts/fuzz.sh
)
missing=()
for p in "${pkgs[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#pkgs[@]} packages present"
  exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
