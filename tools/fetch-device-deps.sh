#!/usr/bin/env bash
# Downloads (here, where apt works) the header-only and small libraries the GPU
# machine lacks, as Debian .deb files into .carry/debs/ (git-ignored). Carry
# `.carry` with the device run; gpu/run-on-device.sh unpacks them there.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .carry/debs
cd .carry/debs
apt-get download libboost1.74-dev libeigen3-dev nlohmann-json3-dev libcli11-dev \
  libgtest-dev libbenchmark-dev libbenchmark1debian
ls -la
