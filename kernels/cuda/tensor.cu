// tensor: integer dot-product and tensor-core throughput on CUDA devices: __dp4a chains
// (int8x4 dot product and accumulate), warp-level mma.sync of every tensor type (fp16 with
// f32 or f16 accumulators, bf16, tf32, fp8 e4m3 and e5m2, int8), and, on sm_90a, warpgroup
// wgmma.mma_async with A and B in shared memory. Each kernel is specialised by the host
// (bench/tensor.cpp) with ITERS and one of DP4A_CHAINS, MMA_TYPE (+ TILES) or WGMMA_TYPE.
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
// wgmma.mma_async m64n128kK with f32 accumulators: a warpgroup (4 warps) computes a 64x128
// tile, 64 f32 registers per thread; A (64 x K) and B (128 x K) are K-major in shared memory,
// 32 bytes per row (K = 16 of 16 bits or K = 32 of 8 bits), so one descriptor layout serves all.
#define WGMMA_D64 \
  "%0, %1, %2, %3, %4, %5, %6, %7, " \
  "%8, %9, %10, %11, %12, %13, %14, %15, " \
  "%16, %17, %18, %19, %20, %21, %22, %23, " \
  "%24, %25, %26, %27, %28, %29, %30, %31, " \
  "%32, %33, %34, %35, %36, %37, %38, %39, " \
  "%40, %41, %42, %43, %44, %45, %46, %47, " \
  "%48, %49, %50, %51, %52, %53, %54, %55, " \
  "%56, %57, %58, %59, %60, %61, %62, %63 "
#define WGMMA_D64_OPERANDS \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
  "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
  "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
  "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), \
  "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
  "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
  "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
  "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])

#define ARCHBENCH_WGMMA(tname, insn, kk, tail)                                                 \
  struct tname {                                                                             \
    static constexpr int K = kk;                                                             \
    static __device__ __forceinline__ void run(float (&d)[64], ulong desc_a, ulong desc_b) { \
      asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n" insn " {" WGMMA_D64 "}, %64, %65, p, 1, 1" tail ";\n}\n" \
                   : WGMMA_D64_OPERANDS                                                      \
                   : "l"(desc_a), "l"(desc_b), "r"(1));                                       \
    }                                                                                        \
  };
ARCHBENCH_WGMMA(wgmma_f16, "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16", 16, ", 0, 0")
ARCHBENCH_WGMMA(wgmma_bf16, "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16", 16, ", 0, 0")
ARCHBENCH_WGMMA(wgmma_e4m3, "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3", 32, "")
#undef ARCHBENCH_WGMMA

// A shared-memory matrix descriptor, no swizzle: the start address, the leading byte offset
// (between core matrices adjacent in K) and the stride byte offset (between core matrices
// adjacent in M or N), each >> 4, in bits 0-13, 16-29 and 32-45; base offset 0 (bits 49-51)
// and swizzle mode 0 (bits 62-63). A core matrix is 8 rows of 16 bytes, stored contiguously
// (128 bytes); a row of 32 bytes is 2 core matrices along K. Stored as
// [row block][K block][8 rows][16 bytes]: K neighbours 128 bytes apart, row-block
// neighbours 256.
__device__ __forceinline__ ulong smem_desc(const void* p) {
  const uint addr = static_cast<uint>(__cvta_generic_to_shared(p));
  return ulong((addr & 0x3FFFF) >> 4) | (ulong(128 >> 4) << 16) | (ulong(256 >> 4) << 32);
}

// Each block: A, -A (64 rows of 32 bytes each) and B (128 rows) copied from global memory to
// shared memory (in[block] = 8192 bytes, in that order), shared by its warpgroups. Each
// warpgroup loads its 64x128 accumulator, runs ITERS trips of D += A*B, D += (-A)*B, one last
// D += A*B, and stores D. c and d: [warpgroup][64 registers][128 threads] floats.
template <class W>
__device__ __forceinline__ void wgmma_tiles(const uint4* __restrict__ in, const float* __restrict__ c,
                                            float* __restrict__ d_out) {
  __shared__ __align__(128) uint4 tile[512];  // A: 0..127, -A: 128..255, B: 256..511
  for (uint i = threadIdx.x; i < 512; i += blockDim.x) tile[i] = in[size_t(blockIdx.x) * 512 + i];
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // make the stores visible to wgmma
  __syncthreads();
  const size_t wg = global_id() / 128;
  const uint t = threadIdx.x % 128;
  float d[64];
#pragma unroll
  for (int r = 0; r < 64; ++r) d[r] = c[(wg * 64 + r) * 128 + t];
  const ulong da = smem_desc(&tile[0]), dna = smem_desc(&tile[128]), db = smem_desc(&tile[256]);
#pragma unroll
  for (int r = 0; r < 64; ++r) asm volatile("" : "+f"(d[r])::"memory");
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
  for (int i = 0; i < ITERS; ++i) {
    W::run(d, da, db);
    W::run(d, dna, db);
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
  }
  W::run(d, da, db);
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
  asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
#pragma unroll
  for (int r = 0; r < 64; ++r) asm volatile("" : "+f"(d[r])::"memory");
#pragma unroll
  for (int r = 0; r < 64; ++r) d_out[(wg * 64 + r) * 128 + t] = d[r];
}

extern "C" __global__ void wgmma(const uint4* __restrict__ in, const float* __restrict__ c, float* __restrict__ d) {
  wgmma_tiles<WGMMA_TYPE>(in, c, d);
}
#endif
