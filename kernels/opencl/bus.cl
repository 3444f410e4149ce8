// bus: the device's side of seed 001's unified-memory study (bus/<backend>/reuse_*), the
// OpenCL twin of kernels/cuda/bus.cu's reuse_pass: one pass adds 1 to every double, wherever
// the data is (a device buffer, or a fine-grained SVM allocation).
#pragma OPENCL EXTENSION cl_khr_fp64 : enable

__kernel void reuse_pass(__global double* restrict data, const ulong n) {
  for (size_t k = get_global_id(0); k < n; k += get_global_size(0)) data[k] += 1.0;
}
