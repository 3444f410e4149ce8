#!/usr/bin/env bash
# Builds a relocatable bundle for compute nodes that have a GPU driver but no build tools:
#   bundle/bin/    archbench and the test binaries
#   bundle/lib/    the shared libraries a bare node lacks (Google Benchmark, the OpenCL ICD loader,
#                  PAPI; NVRTC and its builtins library for the CUDA backend)
#   bundle/include/ the CUDA headers NVRTC needs at run time (cuda_fp16.h, cuda_bf16.h, ...)
#   bundle/tests/  the smoke test and the results tools' tests
#   bundle/run.sh  sets up the library path and an OpenCL vendor list that includes the
#                  NVIDIA driver's libnvidia-opencl.so.1 when present, then runs archbench
# Usage: ci/bundle.sh [DEST]   (default: bundle/). Then copy DEST anywhere and run DEST/run.sh.
# ARCHBENCH_BUNDLE_CUDA=node leaves NVRTC (about 110 MB) and the CUDA headers to the node's
# own CUDA toolkit of the same major version (found through CUDA_HOME or /usr/local/cuda).
set -euo pipefail
cd "$(dirname "$0")/.."
dest="${1:-bundle}"
ci/build.sh >/dev/null
build="${BUILD_DIR:-build}"
rm -rf "$dest"
mkdir -p "$dest/bin" "$dest/lib" "$dest/tests"
cp "$build/archbench" "$build/tests/archbench_unit" "$build/tests/archbench_conformance" "$dest/bin/"
[ -x "$build/tests/archbench_cuda_compile" ] && cp "$build/tests/archbench_cuda_compile" "$dest/bin/"
# The CUDA tracer (in lib/, outside the ldd scan: libcupti stays the node's own) and its planted
# program, for ci/gpu-trace.sh.
[ -e "$build/lib/libarchbench_trace_cuda.so" ] && cp "$build/lib/libarchbench_trace_cuda.so" "$dest/lib/"
[ -x "$build/tests/archbench_trace_cuda_planted" ] && cp "$build/tests/archbench_trace_cuda_planted" "$dest/bin/"
# The OpenCL tracer (LD_PRELOAD; tools/archbench_trace.py finds both tracers in ../lib) and its
# planted programs: bundle/tools/archbench_trace.py run -- bundle/bin/archbench ...
[ -e "$build/lib/libarchbench_trace_opencl.so" ] && cp "$build/lib/libarchbench_trace_opencl.so" "$dest/lib/"
[ -x "$build/tests/archbench_trace_planted" ] && cp "$build/tests/archbench_trace_planted" "$dest/bin/"
# TopDown for any CUDA program (CUPTI injection, libcupti the node's own) and its GPU test.
[ -e "$build/lib/libarchbench_topdown.so" ] && cp "$build/lib/libarchbench_topdown.so" "$dest/lib/"
[ -x "$build/tests/archbench_td_kernels" ] && cp "$build/tests/archbench_td_kernels" "$build/tests/archbench_cg" "$dest/bin/"
cuda_from_node=0
[ "${ARCHBENCH_BUNDLE_CUDA:-}" = node ] && cuda_from_node=1
cp tests/smoke.py tests/topdown/topdown_gpu.py "$dest/tests/"
cp ci/node-run.sh ci/gpu-multi.sh "$dest/"  # gpu-multi.sh: several GPUs (--device=all, the peer matrix)
cp -r tools "$dest/tools"
# Everything the binaries link that is not part of the C/C++ runtime every node has.
for bin in "$dest"/bin/*; do
  ldd "$bin" | awk '/=> \// {print $3}'
done | sort -u | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*|libgcc_s.so*|libstdc++.so*) ;;
    libnvrtc.so*)
      if [ "$cuda_from_node" = 0 ]; then
        cp -L "$lib" "$dest/lib/"
        # NVRTC loads its builtins library by name at run time: ldd does not list it.
        cp -L "$(dirname "$lib")"/libnvrtc-builtins.so.* "$dest/lib/" 2>/dev/null || true
      fi ;;
    *) cp -L "$lib" "$dest/lib/" ;;
  esac
done
# The headers NVRTC includes for the CUDA kernels (the prelude includes cuda_fp16.h and
# cuda_bf16.h, which pull in these).
inc="$(sed -n 's/^CUDAToolkit_BIN_DIR:PATH=//p' "$build/CMakeCache.txt")"
inc="${inc%/bin}/include"
if [ -e "$inc/cuda_fp16.h" ] && [ "$cuda_from_node" = 0 ]; then
  mkdir -p "$dest/include"
  for f in cuda_fp16.h cuda_fp16.hpp cuda_bf16.h cuda_bf16.hpp cuda_fp8.h cuda_fp8.hpp vector_types.h \
           vector_functions.h vector_functions.hpp device_types.h host_defines.h builtin_types.h driver_types.h \
           surface_types.h texture_types.h cuda_runtime_api.h crt nv; do
    [ -e "$inc/$f" ] && cp -rL "$inc/$f" "$dest/include/"
  done
fi
cat > "$dest/run.sh" <<'RUN'
#!/usr/bin/env bash
# Runs the bundled archbench (or, with --test, its tests) on this node.
set -euo pipefail
here="$(cd "$(dirname "$(readlink -f "$0")")" && pwd)"
export LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# NVRTC's headers: the bundle's own copy, else the node's CUDA toolkit.
if [ -z "${ARCHBENCH_CUDA_INCLUDE:-}" ]; then
  for d in "$here/include" "${CUDA_HOME:-/nonexistent}/include" /usr/local/cuda/include; do
    if [ -e "$d/cuda_fp16.h" ]; then export ARCHBENCH_CUDA_INCLUDE="$d"; break; fi
  done
fi
# A bundle made with ARCHBENCH_BUNDLE_CUDA=node takes NVRTC from the node's toolkit.
if [ ! -e "$here/lib/libnvrtc.so.13" ]; then
  for d in "${CUDA_HOME:-/nonexistent}/lib64" /usr/local/cuda/lib64; do
    if [ -d "$d" ]; then export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$d"; break; fi
  done
fi
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
if [ "${1:-}" = "--memcheck" ]; then
  # compute-sanitizer's memcheck over the CUDA conformance test (every CUDA kernel at test size;
  # the energy-window test is left out: it only times launches, for seconds, under the tool).
  shift
  san="$(command -v compute-sanitizer || true)"
  for c in /usr/local/cuda/bin/compute-sanitizer /usr/local/cuda/compute-sanitizer/compute-sanitizer; do
    [ -z "$san" ] && [ -x "$c" ] && san="$c"
  done
  [ -n "$san" ] || { echo "run.sh --memcheck: compute-sanitizer not found" >&2; exit 2; }
  ARCHBENCH_DEVICE=cuda exec "$san" --tool memcheck --error-exitcode 1 --print-limit 20 \
    "$here/bin/archbench_conformance" --gtest_filter='-Measure.Energy*' "$@"
fi
if [ "${1:-}" = "--test" ]; then
  # Unit tests; conformance on every backend's first device (a backend without a device here
  # skips); the NVRTC compile check; the smoke test on the default device.
  shift
  rc=0
  "$here/bin/archbench_unit" || rc=1
  for be in cuda opencl; do
    r=0
    ARCHBENCH_DEVICE="${ARCHBENCH_DEVICE:-$be}" "$here/bin/archbench_conformance" "$@" || r=$?
    [ $r = 0 ] || [ $r = 77 ] || rc=1
    [ -n "${ARCHBENCH_DEVICE:-}" ] && break  # the device was chosen: test that one only
  done
  if [ -x "$here/bin/archbench_cuda_compile" ]; then "$here/bin/archbench_cuda_compile" || rc=1; fi
  python3 "$here/tests/smoke.py" "$here/bin/archbench" || rc=1
  exit $rc
fi
"$here/bin/archbench" "$@"
RUN
chmod +x "$dest/run.sh"
echo "archbench: bundle in $dest ($(du -sh "$dest" | cut -f1)); run $dest/run.sh --list-devices"
