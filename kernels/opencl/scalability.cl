// scalability: seed 002 section 2.5, formula 3. c[index] = a[index] + b[index] with
// index = gid * s + i, i from 0 to s - 1: work-item gid adds its own run of s consecutive
// floats, s = array length / number of work-items.
__kernel void vector_add(__global const float* restrict a, __global const float* restrict b,
                         __global float* restrict c, const uint s) {
  const size_t base = get_global_id(0) * (size_t)s;
  for (uint i = 0; i < s; ++i) c[base + i] = a[base + i] + b[base + i];
}
