// tensor: integer dot-product and tensor-core throughput on CUDA devices: __dp4a chains
// (int8x4 dot product and accumulate), warp-level mma.sync of every tensor type (fp16 with
// f32 or f16 accumulators, bf16, tf32, fp8 e4m3 and e5m2, int8), and, on sm_90a, warpgroup
// wgmma.mma_async with A in registers and B in shared memory. Each kernel is specialised by the
// host (bench/tensor.cpp) with ITERS and one of DP4A_CHAINS, MMA_TYPE (+ TILES) or WGMMA_TYPE.
// Built for throughput: every warp keeps several independent accumulators so that the pipe
// never waits on its own latency; operands are loaded once from global memory, the loop
// touches only registers (and, for wgmma, shared memory), and every accumulator is stored.
// Built to be checked bit for bit: the host picks A and B so that every product and partial
// sum is exact (see bench/tensor.cpp), and each thread stores its accumulator registers in
// the order it loaded them, so the check needs no fragment layout.
#include "archbench.cuh"

#if defined(DP4A_CHAINS)
// x = dp4a(x, k, x): the chain's own bytes times k's bytes, plus itself (signed, wrapping).
// Each chain depends on its last step only through the instruction, so there is no closed
// form to fold; DP4A_CHAINS independent chains per thread cover the latency.
extern "C" __global__ void dp4a(const int* __restrict__ in, int* __restrict__ out, const int k) {
  const size_t gid = global_id(), n = global_size();
  int x[DP4A_CHAINS];
#pragma unroll
  for (int c = 0; c < DP4A_CHAINS; ++c) x[c] = in[gid + size_t(c) * n];
#pragma unroll 4
  for (int i = 0; i < ITERS; ++i) {
#pragma unroll
    for (int c = 0; c < DP4A_CHAINS; ++c) x[c] = __dp4a(x[c], k, x[c]);
  }
  int s = x[0];
#pragma unroll
  for (int c = 1; c < DP4A_CHAINS; ++c) s += x[c];
  out[gid] = s;
}
#endif

#if defined(MMA_TYPE)
// One struct per mma.sync form: DREGS 32-bit accumulator registers per thread (4: f32 or s32,
// 2: f16x2), and run(d, a, b): d = a * b + d on one 16x8 tile. Every form here takes 4
// registers of A and 2 of B per thread (m16n8k16 16-bit, m16n8k8 tf32, m16n8k32 8-bit).
// Registers are passed as .b32, which PTX accepts for .f32, .f16x2 and .s32 operands.
#define ARCHBENCH_MMA4(tname, insn)                                                                \
  struct tname {                                                                                 \
    static constexpr int DREGS = 4;                                                              \
    static __device__ __forceinline__ void run(uint (&d)[4], const uint (&a)[4], const uint (&b)[2]) { \
      asm volatile(insn " {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"      \
                   : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])                             \
                   : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));        \
    }                                                                                            \
  };
#define ARCHBENCH_MMA2(tname, insn)                                                                \
  struct tname {                                                                                 \
    static constexpr int DREGS = 2;                                                              \
    static __device__ __forceinline__ void run(uint (&d)[2], const uint (&a)[4], const uint (&b)[2]) { \
      asm volatile(insn " {%0, %1}, {%2, %3, %4, %5}, {%6, %7}, {%0, %1};"                      \
                   : "+r"(d[0]), "+r"(d[1])                                                     \
                   : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));        \
    }                                                                                            \
  };
ARCHBENCH_MMA4(mma_f16_f32, "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32")
ARCHBENCH_MMA2(mma_f16_f16, "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16")
ARCHBENCH_MMA4(mma_bf16_f32, "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32")
ARCHBENCH_MMA4(mma_tf32_f32, "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32")
#if __CUDA_ARCH__ >= 890
ARCHBENCH_MMA4(mma_e4m3_f32, "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32")
ARCHBENCH_MMA4(mma_e5m2_f32, "mma.sync.aligned.m16n8k32.row.col.f32.e5m2.e5m2.f32")
#endif
ARCHBENCH_MMA4(mma_s8_s32, "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32")
#undef ARCHBENCH_MMA4
#undef ARCHBENCH_MMA2

// Each warp: A and -A (4 registers each), TILES B fragments and TILES accumulators, all
// loaded from global memory once. Then ITERS trips of D_j += A*B_j, D_j += (-A)*B_j for every
// tile j (2 * TILES independent-by-tile mmas per trip), one last D_j += A*B_j, and the
// accumulators stored. Layouts of the buffers, in 32-bit words, lane fastest (coalesced):
// a[warp][2][4][32], b[warp][TILES][2][32], c and d[warp][TILES][DREGS][32].
template <class M>
__device__ __forceinline__ void mma_tiles(const uint* __restrict__ a_in, const uint* __restrict__ b_in,
                                          const uint* __restrict__ c_in, uint* __restrict__ d_out) {
  const size_t warp = global_id() / 32;
  const uint lane = threadIdx.x % 32;
  uint a[4], na[4], b[TILES][2], d[TILES][M::DREGS];
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    a[r] = a_in[(warp * 8 + r) * 32 + lane];
    na[r] = a_in[(warp * 8 + 4 + r) * 32 + lane];
  }
#pragma unroll
  for (int j = 0; j < TILES; ++j) {
#pragma unroll
    for (int r = 0; r < 2; ++r) b[j][r] = b_in[((warp * TILES + j) * 2 + r) * 32 + lane];
#pragma unroll
    for (int r = 0; r < M::DREGS; ++r) d[j][r] = c_in[((warp * TILES + j) * M::DREGS + r) * 32 + lane];
  }
  for (int i = 0; i < ITERS; ++i) {
#pragma unroll
    for (int j = 0; j < TILES; ++j) M::run(d[j], a, b[j]);
#pragma unroll
    for (int j = 0; j < TILES; ++j) M::run(d[j], na, b[j]);
  }
#pragma unroll
  for (int j = 0; j < TILES; ++j) M::run(d[j], a, b[j]);
#pragma unroll
  for (int j = 0; j < TILES; ++j) {
#pragma unroll
    for (int r = 0; r < M::DREGS; ++r) d_out[((warp * TILES + j) * M::DREGS + r) * 32 + lane] = d[j][r];
  }
}

extern "C" __global__ void mma_sync(const uint* __restrict__ a, const uint* __restrict__ b, const uint* __restrict__ c,
                                    uint* __restrict__ d) {
  mma_tiles<MMA_TYPE>(a, b, c, d);
}
#endif

#if defined(WGMMA_TYPE) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
// wgmma.mma_async m64n256kK with f32 accumulators, A from registers and B from shared memory:
// a warpgroup (4 warps) computes a 64x256 tile, 128 f32 registers per thread. The power cap,
// not the issue rate, holds wgmma below its datasheet rate (within 100 ms, NVML throttle reason
// 0x4; the SMs' own cycle count reads 1674-1707 MHz for fp16 and fp8, NVML 1750-1980), so the
// peak is the form that spends the fewest joules a flop: on an H200, m64n128 with A in shared memory ran fp16 857 and fp8 1736 TFLOP/s, m64n256
// with A in shared memory 881 and 1778, m64n256 with A in registers 896 and 1807
// (results/nvidia-h200/580-159-04/peaks-evidence/wgmmavariants.txt): B is read once for twice
// the flops and A not at all from shared memory. B (256 x K) is K-major in shared memory, 32
// bytes per row (K = 16 of 16 bits or K = 32 of 8 bits), so one descriptor layout serves all.
#define WGMMA_D128 \
  "%0, %1, %2, %3, %4, %5, %6, %7, " \
  "%8, %9, %10, %11, %12, %13, %14, %15, " \
  "%16, %17, %18, %19, %20, %21, %22, %23, " \
  "%24, %25, %26, %27, %28, %29, %30, %31, " \
  "%32, %33, %34, %35, %36, %37, %38, %39, " \
  "%40, %41, %42, %43, %44, %45, %46, %47, " \
  "%48, %49, %50, %51, %52, %53, %54, %55, " \
  "%56, %57, %58, %59, %60, %61, %62, %63, " \
  "%64, %65, %66, %67, %68, %69, %70, %71, " \
  "%72, %73, %74, %75, %76, %77, %78, %79, " \
  "%80, %81, %82, %83, %84, %85, %86, %87, " \
  "%88, %89, %90, %91, %92, %93, %94, %95, " \
  "%96, %97, %98, %99, %100, %101, %102, %103, " \
  "%104, %105, %106, %107, %108, %109, %110, %111, " \
  "%112, %113, %114, %115, %116, %117, %118, %119, " \
  "%120, %121, %122, %123, %124, %125, %126, %127 "
#define WGMMA_D128_OPERANDS \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
  "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
  "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
  "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), \
  "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
  "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
  "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
  "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), \
  "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), \
  "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), \
  "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), \
  "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), \
  "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), \
  "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), \
  "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), \
  "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])

// A's fragment: 4 registers a thread of 2 (16-bit) or 4 (8-bit) elements each.
#define ARCHBENCH_WGMMA(tname, insn, kk, tail)                                                 \
  struct tname {                                                                             \
    static constexpr int K = kk;                                                             \
    static __device__ __forceinline__ void run(float (&d)[128], const uint (&a)[4], ulong desc_b) { \
      asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %133, 0;\n" insn " {" WGMMA_D128 "},"                 \
                   " {%128, %129, %130, %131}, %132, p, 1, 1" tail ";\n}\n"                            \
                   : WGMMA_D128_OPERANDS                                                     \
                   : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(1));        \
    }                                                                                        \
  };
ARCHBENCH_WGMMA(wgmma_f16, "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16", 16, ", 0")
ARCHBENCH_WGMMA(wgmma_bf16, "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16", 16, ", 0")
ARCHBENCH_WGMMA(wgmma_e4m3, "wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3", 32, "")
#undef ARCHBENCH_WGMMA

// A shared-memory matrix descriptor, no swizzle: the start address, the leading byte offset
// (between core matrices adjacent in K) and the stride byte offset (between core matrices
// adjacent in N), each >> 4, in bits 0-13, 16-29 and 32-45; base offset 0 (bits 49-51)
// and swizzle mode 0 (bits 62-63). A core matrix is 8 rows of 16 bytes, stored contiguously
// (128 bytes); a row of 32 bytes is 2 core matrices along K. Stored as
// [row block][K block][8 rows][16 bytes]: K neighbours 128 bytes apart, row-block
// neighbours 256.
__device__ __forceinline__ ulong smem_desc(const void* p) {
  const uint addr = static_cast<uint>(__cvta_generic_to_shared(p));
  return ulong((addr & 0x3FFFF) >> 4) | (ulong(128 >> 4) << 16) | (ulong(256 >> 4) << 32);
}

// One warpgroup a block (128 threads; at most 170 registers a thread, so that 3 blocks share an
// SM). in[block] = 12288 bytes: A and -A (64 rows of 32 bytes each: thread t's fragment is words
// 4t..4t+3 of each) and B (256 rows), B copied to shared memory. The warpgroup loads its 64x256
// accumulator, runs ITERS trips of D += A*B, D += (-A)*B, one last D += A*B, and stores D.
// c and d: [warpgroup][128 registers][128 threads] floats.
template <class W>
__device__ __forceinline__ void wgmma_tiles(const uint4* __restrict__ in, const float* __restrict__ c,
                                            float* __restrict__ d_out) {
  __shared__ __align__(128) uint4 tile[512];  // B
  const uint4* block_in = in + size_t(blockIdx.x) * 768;
  for (uint i = threadIdx.x; i < 512; i += blockDim.x) tile[i] = block_in[256 + i];
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // make the stores visible to wgmma
  __syncthreads();
  const size_t wg = blockIdx.x;
  const uint t = threadIdx.x;
  const uint4 av = block_in[t], nav = block_in[128 + t];
  const uint a[4] = {av.x, av.y, av.z, av.w}, na[4] = {nav.x, nav.y, nav.z, nav.w};
  float d[128];
#pragma unroll
  for (int r = 0; r < 128; ++r) d[r] = c[(wg * 128 + r) * 128 + t];
  const ulong db = smem_desc(&tile[0]);
#pragma unroll
  for (int r = 0; r < 128; ++r) asm volatile("" : "+f"(d[r])::"memory");
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
  for (int i = 0; i < ITERS; ++i) {
    W::run(d, a, db);
    W::run(d, na, db);
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
  }
  W::run(d, a, db);
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
  asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
#pragma unroll
  for (int r = 0; r < 128; ++r) asm volatile("" : "+f"(d[r])::"memory");
#pragma unroll
  for (int r = 0; r < 128; ++r) d_out[(wg * 128 + r) * 128 + t] = d[r];
}

extern "C" __global__ void __launch_bounds__(128, 3) wgmma(const uint4* __restrict__ in, const float* __restrict__ c,
                                                           float* __restrict__ d) {
  wgmma_tiles<WGMMA_TYPE>(in, c, d);
}
#endif
