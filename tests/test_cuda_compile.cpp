// cuda_compile (host only, runs in CI without a GPU): every workload of every family, built
// for a CUDA device of each architecture in ARCHBENCH_CUDA_ARCHITECTURES at the test, quick
// and full sizes, has a kernel that NVRTC compiles to a cubin. Each distinct program (source
// and -D values) is one test case; a failure prints NVRTC's log.
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "fixtures/backends/cuda/cuda.hpp"
#include "fixtures/core/workload.hpp"

namespace ab = archbench;

namespace {

// A CUDA device as describe_device() would report an H100-class GPU of compute capability
// `cc` (e.g. 90): the families size their workloads from these facts.
ab::DeviceInfo reference_device(int cc) {
  ab::DeviceInfo d;
  d.backend = "cuda";
  d.selector = "cuda:0";
  d.name = "compile check";
  d.arch = ab::cuda_arch(cc / 10, cc % 10);
  d.is_gpu = true;
  d.compute_units = 132;
  d.max_clock_mhz = 1980;
  d.global_mem = d.max_alloc = 80ull << 30;
  d.local_mem = 48 << 10;
  d.constant_mem = 64 << 10;
  d.cache_size = 50 << 20;
  d.cacheline = 128;
  d.max_work_group = 1024;
  d.fp64 = true;
  d.fp16 = cc >= 53;
  d.bf16 = cc >= 80;
  d.images = true;
  d.image2d_max_width = 131072;
  d.image2d_max_height = 65536;
  d.peers = {1};  // a second GPU, so that the peer family builds its workloads
  ab::cuda_capabilities(d, cc / 10, cc % 10);
  d.device_pointers = true;  // as describe_device() sets it, so that latency's chase_ptr kernels are built
  return d;
}

struct Program {
  ab::KernelSpec spec;
  std::string arch, example;  // a workload that uses it
};

class CompileTest : public testing::Test {
 public:
  explicit CompileTest(Program p) : p_(std::move(p)) {}
  void TestBody() override {
    const ab::CudaProgram c = ab::compile_cuda(p_.spec, p_.arch);
    EXPECT_TRUE(c.ok()) << p_.example << ": " << p_.spec.source << ".cu (" << p_.spec.entry << ") for " << p_.arch
                        << " with " << c.options << "\n" << c.log;
    EXPECT_NE(c.ptx.find(p_.spec.entry), std::string::npos) << "entry point " << p_.spec.entry << " missing";
  }

 private:
  Program p_;
};

std::vector<int> architectures() {
  std::vector<int> out;
  std::istringstream s(ARCHBENCH_CUDA_ARCHS);
  std::string a;
  while (std::getline(s, a, ','))
    if (!a.empty()) out.push_back(std::stoi(a));
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  std::map<std::string, Program> programs;  // key -> program, deduplicated
  for (int cc : architectures()) {
    const ab::DeviceInfo d = reference_device(cc);
    for (ab::Size size : {ab::Size::test, ab::Size::quick, ab::Size::full})
      for (const ab::Family& f : ab::families())
        for (const ab::Workload& w : f.build({d, size})) {
          // Not for this device, or no kernel (a transfer the backend does itself, unless it names
          // the kernel it launches; steps name theirs).
          if (!w.skip.empty()) continue;
          std::vector<ab::KernelSpec> kernels;
          if (!w.kernel.source.empty()) kernels.push_back(w.kernel);
          for (const ab::Step& s : w.steps)
            if (!s.copy && !s.host) kernels.push_back(s.kernel);
          for (const ab::KernelSpec& k : kernels) {
            std::string key = d.arch + "|" + k.source + "|" + k.entry;
            for (const auto& [name, v] : k.defines) key += "|" + name + "=" + v;
            programs.emplace(key, Program{k, d.arch, w.name});
          }
        }
  }
  // Compile them all in parallel first (NVRTC is thread-safe; results are cached), so that
  // the test cases below only read the cache.
  std::vector<const Program*> all;
  for (const auto& [key, p] : programs) all.push_back(&p);
  std::atomic<std::size_t> next{0};
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < std::max(1u, std::thread::hardware_concurrency()); ++t)
    pool.emplace_back([&] {
      for (std::size_t i; (i = next++) < all.size();) ab::compile_cuda(all[i]->spec, all[i]->arch);
    });
  for (auto& th : pool) th.join();
  for (const auto& [key, p] : programs) {
    const std::string suite = p.arch + "_" + p.spec.source;
    testing::RegisterTest(suite.c_str(), key.c_str(), nullptr, nullptr, __FILE__, __LINE__,
                          [p = p]() -> testing::Test* { return new CompileTest(p); });
  }
  std::cout << programs.size() << " distinct CUDA programs for " << ARCHBENCH_CUDA_ARCHS << "\n";
  return RUN_ALL_TESTS();
}
