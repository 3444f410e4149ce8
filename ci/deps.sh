#!/usr/bin/env bash
# Installs the Debian/Ubuntu packages archbench needs, only those that are missing.
# Run as root or with sudo available. ARCHBENCH_NO_INSTALL=1 only reports what is missing.
set -euo pipefail
pkgs=(cmake ninja-build g++ libbenchmark-dev libgtest-dev ocl-icd-opencl-dev opencl-headers
      pocl-opencl-icd clinfo clpeak python3-pyopencl python3-numpy libpapi-dev python3 python3-matplotlib git
      python3-venv python3-setuptools python3-wheel
      openmpi-bin libopenmpi-dev chromium dpkg-dev)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "archbench: all packages present"
  exit 0
fi
echo "archbench: installing ${missing[*]}"
if [ "${ARCHBENCH_NO_INSTALL:-0}" = 1 ]; then echo "ARCHBENCH_NO_INSTALL=1: not installing" >&2; exit 1; fi
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
