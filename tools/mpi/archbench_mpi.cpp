// archbench_mpi: archbench on every rank of an MPI job, gathered on rank 0 into one results
// file tagged by host, rank and device, with the variability report (tools/archbench_merge.py,
// the same merge as `archbench --device=all`).
//
// Usage: mpirun -np N archbench_mpi [--out=MERGED.json] [--archbench=PATH] [--device=SEL0,SEL1,...]
//                                    [archbench args...]
//
// Each rank runs archbench as a child process (so that a GPU that crashes its run takes no
// rank down) on the device of its local rank: the local-rank-th of the devices
// `--device=all` means (every CUDA GPU where there is one, else every device: on a machine
// with PoCL alone that is the one CPU device, which then every rank of the host shares).
// --device=SEL0,SEL1,... (or ARCHBENCH_MPI_DEVICES) gives the selector per local rank instead
// (wrapping: one selector is every rank's).
// A rank whose run fails is reported in the merged file and the report, not fatal: rank 0's
// exit status (so mpirun's) is the number of failed ranks, 125 when the merge itself failed.
#include <mpi.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "fixtures/node.hpp"
#include "fixtures/selection.hpp"

namespace ab = archbench;
namespace fs = std::filesystem;

namespace {

bool starts_with(const std::string& s, const std::string& p) { return s.rfind(p, 0) == 0; }

const char* kUsage =
    "Usage: mpirun -np N archbench_mpi [--out=MERGED.json] [--archbench=PATH] [--device=SEL0,SEL1,...] [archbench "
    "args...]\n"
    "Runs archbench on every rank (each on the device of its local rank, or SELk for local rank k) and writes one\n"
    "merged file on rank 0 (default archbench-mpi.json) with <file>-variability.json beside it. Exit status: the\n"
    "number of ranks whose run failed (they are reported in both files).\n";

// The selector this rank runs on (see the header), or "" with `note` saying why there is none.
std::string rank_device(int local_rank, const std::string& list, std::string& note) {
  if (!list.empty()) {
    std::vector<std::string> sels;
    std::istringstream s(list);
    for (std::string sel; std::getline(s, sel, ',');) sels.push_back(sel);
    if (!sels.empty()) return sels[local_rank % sels.size()];
  }
  const std::vector<std::unique_ptr<ab::Backend>> backends = ab::backends();
  const ab::Found found = ab::find_devices(backends);
  const std::vector<int> chosen = ab::node_devices(found.devices, "");
  if (chosen.empty()) {
    note = "no device: " + found.problems;
    return "";
  }
  if (local_rank >= int(chosen.size()))
    note = "more ranks than devices on this host: local rank " + std::to_string(local_rank) + " shares " +
           found.devices[chosen[local_rank % chosen.size()]].selector;
  return found.devices[chosen[local_rank % chosen.size()]].selector;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

// Every rank's bytes, concatenated on rank 0, with each rank's offset and length.
std::vector<std::string> gather(const std::string& mine, int rank, int size) {
  int len = int(mine.size());
  std::vector<int> lens(size), offsets(size);
  MPI_Gather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  std::string all;
  if (rank == 0) {
    int total = 0;
    for (int r = 0; r < size; ++r) offsets[r] = total, total += lens[r];
    all.resize(std::max(total, 1));
  }
  MPI_Gatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), offsets.data(), MPI_CHAR, 0, MPI_COMM_WORLD);
  std::vector<std::string> out;
  if (rank == 0)
    for (int r = 0; r < size; ++r) out.push_back(all.substr(offsets[r], lens[r]));
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1, local_rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm local;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local);
  MPI_Comm_rank(local, &local_rank);
  MPI_Comm_free(&local);
  char host[256] = "unknown";
  gethostname(host, sizeof host - 1);

  std::string out = "archbench-mpi.json";
  const char* env_devices = std::getenv("ARCHBENCH_MPI_DEVICES");
  std::string devices = env_devices ? env_devices : "";
  std::string archbench = (fs::path(ab::self_path()).parent_path() / "archbench").string();
  std::vector<std::string> passed;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (starts_with(a, "--out=")) out = a.substr(6);
    else if (starts_with(a, "--archbench=")) archbench = a.substr(12);
    else if (starts_with(a, "--device=")) devices = a.substr(9);
    else if (a == "--help" || a == "-h") {
      if (rank == 0) std::cout << kUsage;
      MPI_Finalize();
      return 0;
    } else if (!starts_with(a, "--benchmark_out") && !starts_with(a, "--record")) passed.push_back(a);
  }

  char tmpl[] = "/tmp/archbench-mpi-XXXXXX";
  if (!mkdtemp(tmpl)) {
    std::cerr << "archbench_mpi: rank " << rank << ": cannot make a temporary folder in /tmp\n";
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  const std::string dir = tmpl;
  std::string note;
  const std::string selector = rank_device(local_rank, devices, note);
  const std::string tag = "[rank " + std::to_string(rank) + " " + host + " " + selector + "] ";
  if (!note.empty()) std::cout << tag << "archbench_mpi: " << note << "\n";
  const std::string json = dir + "/rank.json";
  ab::ChildResult result;
  if (selector.empty()) {
    result.tail = note;
  } else {
    std::vector<std::string> child = {archbench};
    child.insert(child.end(), passed.begin(), passed.end());
    child.insert(child.end(), {"--device=" + selector, "--benchmark_out=" + json, "--benchmark_out_format=json"});
    result = ab::run_child(child, tag);
  }

  // What rank 0 needs from each rank, fields separated by NUL (neither JSON nor output holds one).
  const std::string results = result.status == 0 || fs::exists(json) ? read_file(json) : "";
  const std::string mine = std::to_string(result.status) + '\0' + host + '\0' + selector + '\0' +
                           std::to_string(local_rank) + '\0' + result.tail + '\0' + results;
  const std::vector<std::string> all = gather(mine, rank, size);
  int code = 0;
  if (rank == 0) {
    std::vector<ab::RunRecord> runs;
    int failed = 0;
    for (int r = 0; r < size; ++r) {
      std::vector<std::string> f;
      std::size_t begin = 0;
      for (int k = 0; k < 5; ++k) {
        const std::size_t end = all[r].find('\0', begin);
        f.push_back(all[r].substr(begin, end - begin));
        begin = end + 1;
      }
      ab::RunRecord run;
      run.result.status = std::atoi(f[0].c_str());
      run.result.tail = f[4];
      run.tags = {{"host", f[1]}, {"rank", std::to_string(r)}, {"local_rank", f[3]}, {"device_selector", f[2]}};
      if (begin < all[r].size()) {
        run.json = dir + "/rank-" + std::to_string(r) + ".json";
        std::ofstream(run.json, std::ios::binary) << all[r].substr(begin);
      }
      failed += run.result.status != 0;
      runs.push_back(std::move(run));
    }
    const int merged = ab::merge_runs(runs, dir, out);
    std::cout << "archbench_mpi: " << size - failed << " of " << size << " ranks ran; merged results in " << out
              << "\n";
    code = merged == 2 ? 125 : std::min(failed, 124);
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
  MPI_Finalize();
  return code;
}
