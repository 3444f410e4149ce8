// A real multi-kernel CUDA program for tools/archbench_topdown.py (as the seed ran Rodinia and
// Altis): conjugate gradient on the 2-D Poisson problem (5-point stencil, N x N grid), with a
// stencil SpMV, a dot-product reduction, and two vector updates per iteration. It checks its
// answer on the host: b - A x must equal the residual the recurrence carries, and the energy
// 1/2 x.Ax - b.x, which CG lowers at every step (its residual norm need not fall), must be
// below its value at x = 0.
// Usage: archbench_cg [N] [iterations]   (default 2048 x 2048, at most 200 iterations)
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "check.cuh"

// y = A x for the 5-point Laplacian with zero boundary.
__global__ void stencil_spmv(const double* x, double* y, int n) {
  const int i = blockIdx.y * blockDim.y + threadIdx.y, j = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n || j >= n) return;
  const size_t k = size_t(i) * n + j;
  double v = 4 * x[k];
  if (i > 0) v -= x[k - n];
  if (i < n - 1) v -= x[k + n];
  if (j > 0) v -= x[k - 1];
  if (j < n - 1) v -= x[k + 1];
  y[k] = v;
}

// Partial sums of a . b, one per block (shared-memory tree); the host adds the partials.
__global__ void dot_partial(const double* a, const double* b, double* partial, size_t n) {
  __shared__ double s[256];
  double v = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    v += a[i] * b[i];
  s[threadIdx.x] = v;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) s[threadIdx.x] += s[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) partial[blockIdx.x] = s[0];
}

// x += alpha p; r -= alpha q.
__global__ void update_xr(double* x, double* r, const double* p, const double* q, double alpha, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    x[i] += alpha * p[i];
    r[i] -= alpha * q[i];
  }
}

// p = r + beta p.
__global__ void update_p(double* p, const double* r, double beta, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    p[i] = r[i] + beta * p[i];
}

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 2048, iters = argc > 2 ? std::atoi(argv[2]) : 200;
  const size_t len = size_t(n) * n;
  int sms = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int blocks = sms * 4;
  double *x, *r, *p, *q, *part;
  for (double** v : {&x, &r, &p, &q}) CHECK(cudaMalloc(v, len * sizeof(double)));
  CHECK(cudaMalloc(&part, blocks * sizeof(double)));
  std::vector<double> b(len), partial(blocks);
  for (size_t k = 0; k < len; ++k) b[k] = 1.0 + double(k % 7) / 7;  // right-hand side
  CHECK(cudaMemset(x, 0, len * sizeof(double)));
  CHECK(cudaMemcpy(r, b.data(), len * sizeof(double), cudaMemcpyHostToDevice));  // r = b - A 0
  CHECK(cudaMemcpy(p, r, len * sizeof(double), cudaMemcpyDeviceToDevice));
  auto dot = [&](const double* u, const double* v) {
    dot_partial<<<blocks, 256>>>(u, v, part, len);
    CHECK(cudaMemcpy(partial.data(), part, blocks * sizeof(double), cudaMemcpyDeviceToHost));
    double s = 0;
    for (double t : partial) s += t;
    return s;
  };
  const dim3 tile(32, 8), grid((n + 31) / 32, (n + 7) / 8);
  double rr = dot(r, r);
  const double rr0 = rr;
  int it = 0;
  for (; it < iters && rr > 1e-20 * rr0; ++it) {
    stencil_spmv<<<grid, tile>>>(p, q, n);
    const double alpha = rr / dot(p, q);
    update_xr<<<blocks, 256>>>(x, r, p, q, alpha, len);
    const double next = dot(r, r);
    update_p<<<blocks, 256>>>(p, r, next / rr, len);
    rr = next;
  }
  CHECK(cudaDeviceSynchronize());
  // Check on the host: || b - A x || must match the recurrence's residual (within rounding).
  std::vector<double> hx(len);
  CHECK(cudaMemcpy(hx.data(), x, len * sizeof(double), cudaMemcpyDeviceToHost));
  double res = 0, energy = 0;
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) {
      const size_t k = size_t(i) * n + j;
      double v = 4 * hx[k] - (i > 0 ? hx[k - n] : 0) - (i < n - 1 ? hx[k + n] : 0) - (j > 0 ? hx[k - 1] : 0) -
                 (j < n - 1 ? hx[k + 1] : 0);
      res += (b[k] - v) * (b[k] - v);
      energy += 0.5 * hx[k] * v - b[k] * hx[k];
    }
  std::printf("cg: %d x %d, %d iterations, residual %.3e of the start (recurrence %.3e), energy %.6e\n", n, n,
              it, std::sqrt(res / rr0), std::sqrt(rr / rr0), energy);
  if (!(std::fabs(std::sqrt(res) - std::sqrt(rr)) <= 1e-6 * std::sqrt(rr0) + 1e-3 * std::sqrt(rr)) || !(energy < 0)) {
    std::fprintf(stderr, "cg: the solution does not satisfy A x = b as the recurrence says\n");
    return 1;
  }
  return 0;
}
