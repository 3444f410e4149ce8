#!/usr/bin/env bash
# Builds a relocatable bundle for compute nodes that have a GPU driver but no build tools. It loads
# on x86-64 Linux with glibc 2.28 or newer (RHEL/Rocky 8 and 9, SLES 15, Ubuntu 20.04 and newer):
#   bundle/bin/    archbench, archbench_mpi (where MPI was found here) and the test binaries, built
#                  with ARCHBENCH_PORTABLE (cmake/portable.cmake): libstdc++ and Google Benchmark
#                  linked statically, no glibc symbol newer than 2.28 (checked below: tests/e2e/needed.py)
#   bundle/lib/    the tracers and TopDown's injection library; NVRTC and its builtins library for
#                  the CUDA backend
#   bundle/lib/opencl/ an OpenCL ICD loader (Debian's ocl-icd: it needs glibc 2.34), used only on a
#                  node that has none of its own
#   bundle/include/ the CUDA headers NVRTC needs at run time (cuda_fp16.h, cuda_bf16.h, ...)
#   bundle/tests/  the smoke test and TopDown's GPU test, laid out as in the tree (e2e/, analysis/topdown/, lib/)
#   bundle/run.sh  sets up the library path and an OpenCL vendor list that includes the
#                  NVIDIA driver's libnvidia-opencl.so.1 when present, then runs archbench
#                  (run.sh --mpi: archbench_mpi, under the node's mpirun)
# The node's own: glibc and libgcc_s; the GPU driver (libcuda, libnvidia-ml, libnvidia-opencl);
# CUPTI (libcupti, the CUDA major version NVRTC is); MPI: an MPI library must match the cluster's
# launcher and network, so archbench_mpi uses the node's libmpi.so.40 (Open MPI 4 or 5); with
# another MPI, build archbench_mpi on the cluster (README: MPI).
# Usage: ci/bundle.sh [DEST]   (default: bundle/). Then copy DEST anywhere and run DEST/run.sh.
# The build is build-portable/ (BUILD_DIR overrides). Google Benchmark's source is Debian's, of
# the libbenchmark-dev installed here (apt-get source), unless ARCHBENCH_BENCHMARK_SOURCE names one.
# ARCHBENCH_BUNDLE_CUDA=node leaves NVRTC (about 110 MB) and the CUDA headers to the node's
# own CUDA toolkit of the same major version (found through CUDA_HOME or /usr/local/cuda).
set -euo pipefail
cd "$(dirname "$0")/.."
dest="${1:-bundle}"
build="$(realpath -m "${BUILD_DIR:-build-portable}")"  # absolute: apt is given paths below
gbench="${ARCHBENCH_BENCHMARK_SOURCE:-$build/benchmark-src}"
if [ ! -f "$gbench/CMakeLists.txt" ]; then
  # Debian's source package, through a deb-src list of this machine's own mirrors kept in the build.
  apt="$build/benchmark-apt"
  rm -rf "$apt" && mkdir -p "$apt/lists/partial" "$apt/parts" "$apt/cache/archives/partial" "$apt/src"
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -e "$f" ] && sed 's/^Types: deb$/Types: deb-src/' "$f" > "$apt/parts/$(basename "$f")"
  done
  { cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null || true; } | sed -n 's/^deb /deb-src /p' > "$apt/parts/src.list"
  o=(-o Dir::Etc::SourceList=/dev/null -o Dir::Etc::SourceParts="$apt/parts"
     -o Dir::State::Lists="$apt/lists" -o Dir::Cache="$apt/cache")
  version="$(dpkg-query -W -f='${source:Version}' libbenchmark-dev 2>/dev/null || true)"
  if ! command -v dpkg-source >/dev/null || ! apt-get "${o[@]}" -qq update ||
     ! (cd "$apt/src" && apt-get "${o[@]}" -qq source "benchmark${version:+=$version}" >/dev/null 2>&1); then
    echo "ci/bundle.sh: cannot get Google Benchmark's source (Debian's, apt-get source benchmark: needs dpkg-dev" \
         "and the mirror); give ARCHBENCH_BENCHMARK_SOURCE=<its folder>" >&2
    exit 1
  fi
  rm -rf "$gbench" && mv "$apt"/src/benchmark-*/ "$gbench"
fi
BUILD_DIR="$build" ci/build.sh -DCMAKE_BUILD_TYPE=Release -DARCHBENCH_PORTABLE=ON \
  -DARCHBENCH_BENCHMARK_SOURCE="$(cd "$gbench" && pwd)" >/dev/null
rm -rf "$dest"
mkdir -p "$dest/bin" "$dest/lib" "$dest/tests"
cp "$build/archbench" "$build/tests/archbench_unit" "$build/tests/archbench_conformance" "$dest/bin/"
[ -x "$build/archbench_mpi" ] && cp "$build/archbench_mpi" "$dest/bin/"
[ -x "$build/tests/archbench_cuda_compile" ] && cp "$build/tests/archbench_cuda_compile" "$dest/bin/"
# The CUDA tracer (in lib/, outside the ldd scan: libcupti stays the node's own) and its test
# programs, the planted one and what typical applications do (cuda_apis: its cuBLAS is the node's
# own too, left out below), for ci/gpu-trace.sh.
[ -e "$build/lib/libarchbench_trace_cuda.so" ] && cp "$build/lib/libarchbench_trace_cuda.so" "$dest/lib/"
[ -x "$build/tests/archbench_trace_cuda_planted" ] && cp "$build/tests/archbench_trace_cuda_planted" "$dest/bin/"
[ -x "$build/tests/archbench_trace_cuda_apis" ] && cp "$build/tests/archbench_trace_cuda_apis" "$dest/bin/"
# The OpenCL tracer (LD_PRELOAD; tools/archbench_trace.py finds both tracers in ../lib) and its
# planted programs: bundle/tools/archbench_trace.py run -- bundle/bin/archbench ...
[ -e "$build/lib/libarchbench_trace_opencl.so" ] && cp "$build/lib/libarchbench_trace_opencl.so" "$dest/lib/"
[ -x "$build/tests/archbench_trace_planted" ] && cp "$build/tests/archbench_trace_planted" "$dest/bin/"
# TopDown for any CUDA program (CUPTI injection, libcupti the node's own) and its GPU test.
[ -e "$build/lib/libarchbench_topdown.so" ] && cp "$build/lib/libarchbench_topdown.so" "$dest/lib/"
# Its time-resolved mode (archbench_topdown.py --timeline: CUPTI PM sampling, one pass).
[ -e "$build/lib/libarchbench_pmsampling.so" ] && cp "$build/lib/libarchbench_pmsampling.so" "$build/lib/archbench_pmsampler" "$dest/lib/"
# PC sampling, line by line (archbench_pcsample.py: CUPTI PC sampling and SASS metrics).
[ -e "$build/lib/libarchbench_pcsampling.so" ] && cp "$build/lib/libarchbench_pcsampling.so" "$dest/lib/"
[ -x "$build/tests/archbench_td_kernels" ] && cp "$build/tests/archbench_td_kernels" "$build/tests/archbench_cg" "$dest/bin/"
cuda_from_node=0
[ "${ARCHBENCH_BUNDLE_CUDA:-}" = node ] && cuda_from_node=1
cp --parents tests/e2e/smoke.py tests/analysis/topdown/topdown_gpu.py tests/lib/gpu.py "$dest/"  # as in the tree: gpu.py is imported
cp ci/node-run.sh ci/gpu-node.sh "$dest/"  # gpu-node.sh: a node of several GPUs (peer matrix, collectives, health verdict)
cp -r tools "$dest/tools"
# Everything the binaries link that is not part of the C runtime every node has (archbench_mpi:
# what it needs beyond archbench's is MPI, the node's).
for bin in "$dest"/bin/*; do
  [ "$(basename "$bin")" = archbench_mpi ] || ldd "$bin" | awk '/=> \// {print $3}'
done | sort -u | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*|libgcc_s.so*) ;;
    libcublas.so*|libcublasLt.so*) ;;  # archbench_trace_cuda_apis': the node's toolkit's, as libcupti (hundreds of MB)
    libOpenCL.so*) mkdir -p "$dest/lib/opencl" && cp -L "$lib" "$dest/lib/opencl/" ;;
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
# The OpenCL ICD loader: the node's where it has one (it knows the node's vendors), else ours.
opencl=":$here/lib/opencl"
ld="${LD_LIBRARY_PATH:-}"
for d in ${ld//:/ }; do if [ -e "$d/libOpenCL.so.1" ]; then opencl=""; fi; done
case "$({ ldconfig -p || /sbin/ldconfig -p; } 2>/dev/null || true)" in *"libOpenCL.so.1 "*) opencl="" ;; esac
export LD_LIBRARY_PATH="$here/lib$opencl${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
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
if [ "${1:-}" = "--mpi" ]; then
  # One rank of the MPI launcher: mpirun -n N DEST/run.sh --mpi --out=merged.json [flags]
  # (libmpi.so.40 is the node's: load its Open MPI first, e.g. module load openmpi).
  shift
  exec "$here/bin/archbench_mpi" "$@"
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
  python3 "$here/tests/e2e/smoke.py" "$here/bin/archbench" || rc=1
  exit $rc
fi
"$here/bin/archbench" "$@"
RUN
chmod +x "$dest/run.sh"
# The promise of the bundle: nothing it carries needs more than glibc 2.28 or the node's libstdc++
# (lib/opencl aside: the node's loader comes first).
python3 tests/e2e/needed.py - --glibc 2.28 "$dest"/bin/* "$dest"/lib/*.so* >"$dest/glibc-check.txt" ||
  { cat "$dest/glibc-check.txt" >&2; echo "ci/bundle.sh: the bundle needs more than glibc 2.28 (above)" >&2; exit 1; }
echo "archbench: bundle in $dest ($(du -sh "$dest" | cut -f1)); run $dest/run.sh --list-devices"
