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

// The node families' plan on a machine of `gpus` GPUs, as GPU `self` builds it at `size`.
std::vector<ab::Workload> node_family(const char* name, int gpus, int self, ab::Size size, const std::string& nccl) {
  ab::DeviceInfo d = reference_device(90);
  d.selector = "cuda:" + std::to_string(self);
  d.peers.clear();
  for (int g = 0; g < gpus; ++g)
    if (g != self) d.peers.push_back(g);
  d.no_collectives = nccl;
  for (const ab::Family& f : ab::families())
    if (std::string(f.name) == name) return f.build({d, size});
  return {};
}

}  // namespace

// The peer matrix from one process: every ordered pair (both engines, both ways), the
// bidirectional pairs, four patterns per engine and every pair's latency, built once (on the
// first GPU; the others say so in one entry); 80 benchmarks on 4 GPUs, 344 on 8.
TEST(NodeFamilies, PeerMatrixFromTheFirstGpu) {
  for (const auto& [gpus, count] : {std::pair{2, 2 * 4 + 1 * 2 + 6 + 2}, {4, 80}, {8, 344}}) {
    const std::vector<ab::Workload> ws = node_family("peer", gpus, 0, ab::Size::quick, "");
    EXPECT_EQ(ws.size(), std::size_t(count)) << gpus << " GPUs";
    std::set<std::string> names;
    for (const ab::Workload& w : ws) {
      EXPECT_TRUE(names.insert(w.name).second) << "twice: " << w.name;
      ASSERT_TRUE(w.node) << w.name;
      EXPECT_TRUE(w.skip.empty()) << w.name;
    }
    for (int s = 0; s < gpus; ++s)
      for (int t = 0; t < gpus; ++t) {
        if (s == t) continue;
        for (const char* v : {"ce_read", "ce_write", "sm_read", "sm_write"}) {
          const std::string name = "peer/cuda/" + std::string(v) + "/src:" + std::to_string(s) + "/dst:" +
                                   std::to_string(t) + "/bytes:268435456";
          EXPECT_TRUE(names.count(name)) << name;
        }
      }
  }
  const std::vector<ab::Workload> other = node_family("peer", 4, 2, ab::Size::quick, "");
  ASSERT_EQ(other.size(), 1u);
  EXPECT_NE(other[0].skip.find("cuda:0"), std::string::npos) << other[0].skip;
}

// The collectives: five operations, 8 B to 1 GiB in x8 steps, busbw as nccl-tests defines it;
// without NCCL one entry that skips with the reason.
TEST(NodeFamilies, CollectivesWithBusBandwidthOrOneSkip) {
  const std::vector<ab::Workload> ws = node_family("collective", 4, 0, ab::Size::quick, "");
  EXPECT_EQ(ws.size(), 5u * 10u);
  for (const ab::Workload& w : ws) {
    ASSERT_TRUE(w.node) << w.name;
    EXPECT_EQ(w.node->bytes % 16, 0u) << w.name;  // a whole number of floats on each of 4 GPUs
    EXPECT_DOUBLE_EQ(w.cost.bus_bytes, w.cost.bytes_written * ab::bus_factor(w.node->op, 4)) << w.name;
  }
  EXPECT_EQ(ws.front().name, "collective/cuda/all_reduce/gpus:4/bytes:16");  // 8 B rounded up to 4 floats
  EXPECT_EQ(ws.back().name, "collective/cuda/broadcast/gpus:4/bytes:1073741824");
  const std::vector<ab::Workload> none = node_family("collective", 4, 0, ab::Size::quick, "NCCL not found (...)");
  ASSERT_EQ(none.size(), 1u);
  EXPECT_EQ(none[0].skip, "NCCL not found (...)");
}

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
