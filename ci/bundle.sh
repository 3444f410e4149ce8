#!/usr/bin/env bash
# Builds a relocatable bundle for compute nodes that have a GPU driver but no build tools:
#   bundle/bin/    archbench and the test binaries
#   bundle/lib/    the shared libraries a bare node lacks (Google Benchmark, the OpenCL ICD loader)
#   bundle/tests/  the smoke test and the results tools' tests
#   bundle/run.sh  sets up the library path and an OpenCL vendor list that includes the
#                  NVIDIA driver's libnvidia-opencl.so.1 when present, then runs archbench
# Usage: ci/bundle.sh [DEST]   (default: bundle/). Then copy DEST anywhere and run DEST/run.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
dest="${1:-bundle}"
ci/build.sh >/dev/null
build="${BUILD_DIR:-build}"
rm -rf "$dest"
mkdir -p "$dest/bin" "$dest/lib" "$dest/tests"
cp "$build/archbench" "$build/tests/archbench_unit" "$build/tests/archbench_conformance" "$dest/bin/"
cp tests/smoke.py "$dest/tests/"
cp ci/node-run.sh "$dest/"
cp -r tools "$dest/tools"
# Everything the binaries link that is not part of the C/C++ runtime every node has.
for bin in "$dest"/bin/*; do
  ldd "$bin" | awk '/=> \// {print $3}'
done | sort -u | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*|libgcc_s.so*|libstdc++.so*) ;;
    *) cp -L "$lib" "$dest/lib/" ;;
  esac
done
cat > "$dest/run.sh" <<'RUN'
#!/usr/bin/env bash
# Runs the bundled archbench (or, with --test, its tests) on this node.
set -euo pipefail
here="$(cd "$(dirname "$(readlink -f "$0")")" && pwd)"
export LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
if [ -z "${OCL_ICD_VENDORS:-}" ]; then
  # The node's registered OpenCL vendors, plus NVIDIA's driver library if it is installed
  # but not registered (common on container images that only list PoCL).
  icd="$(mktemp -d)"
  trap 'rm -rf "$icd"' EXIT
  cp /etc/OpenCL/vendors/*.icd "$icd/" 2>/dev/null || true
  if ! grep -qs nvidia "$icd"/*.icd; then
    for d in /usr/lib/x86_64-linux-gnu /usr/lib64 /usr/lib /usr/local/nvidia/lib64; do
      if [ -e "$d/libnvidia-opencl.so.1" ]; then echo "$d/libnvidia-opencl.so.1" > "$icd/nvidia.icd"; break; fi
    done
  fi
  export OCL_ICD_VENDORS="$icd"
fi
if [ "${1:-}" = "--test" ]; then
  shift
  rc=0
  "$here/bin/archbench_unit" || rc=1
  "$here/bin/archbench_conformance" "$@" || rc=1
  python3 "$here/tests/smoke.py" "$here/bin/archbench" || rc=1
  exit $rc
fi
"$here/bin/archbench" "$@"
RUN
chmod +x "$dest/run.sh"
echo "archbench: bundle in $dest ($(du -sh "$dest" | cut -f1)); run $dest/run.sh --list-devices"
