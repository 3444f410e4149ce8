// The record writer every analysis library writes through (tools/analysis/common/common.hpp): it
// flushes as it goes (every 256 records and every second), so that a program killed later keeps
// what was recorded; a fatal signal's hook ends the file with the signal; a full disk ends the
// file, not the program; a forked child neither writes its parent's records again nor to its file;
// the exit hook runs; the file is named and opened as FORMAT.md says.
#include "tools/analysis/common/common.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace tr = archbench::trace;

namespace {

std::string temp_path(const char* name) {
  return ::testing::TempDir() + "record_writer_" + std::to_string(getpid()) + "_" + name;
}

// What a reader sees in the file now (another open of it: not the writer's buffer).
std::vector<std::string> lines_of(const std::string& path) {
  std::ifstream f(path);
  std::vector<std::string> lines;
  for (std::string l; std::getline(f, l);) lines.push_back(l);
  return lines;
}

std::string small(int i) { return "{\"type\":\"x\",\"i\":" + std::to_string(i) + "}\n"; }

// A file whose stdio buffer holds more than the writer's 256 records: what reaches the file is
// what the writer flushed.
FILE* open_buffered(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (f) setvbuf(f, new char[1 << 16], _IOFBF, 1 << 16);  // (glibc sizes its own buffer as it likes; kept)
  return f;
}

TEST(RecordWriter, FlushesEvery256Records) {
  const std::string path = temp_path("256");
  tr::TraceFile out;
  out.adopt(open_buffered(path), path);
  for (int i = 0; i < 255; ++i) out.put(small(i));
  EXPECT_EQ(lines_of(path).size(), 0u);
  out.put(small(255));
  EXPECT_EQ(lines_of(path).size(), 256u);
  EXPECT_EQ(out.written(), 256u);
  EXPECT_TRUE(out.close());
  std::remove(path.c_str());
}

TEST(RecordWriter, FlushesOnceASecondHasPassed) {
  const std::string path = temp_path("second");
  tr::TraceFile out;
  out.adopt(open_buffered(path), path);
  out.put(small(0));
  EXPECT_EQ(lines_of(path).size(), 0u);
  std::this_thread::sleep_for(std::chrono::milliseconds(1050));
  out.put(small(1));
  EXPECT_EQ(lines_of(path).size(), 2u);
  out.close();
  std::remove(path.c_str());
}

TEST(RecordWriter, JsonLineWritesThroughIt) {
  const std::string path = temp_path("json");
  tr::TraceFile out;
  out.adopt(std::fopen(path.c_str(), "w"), path);
  tr::JsonLine("kernel").str("name", "a \"b\"").unum("seq", 3).write(out);
  out.flush();
  EXPECT_EQ(out.written(), 1u);
  const std::vector<std::string> l = lines_of(path);
  ASSERT_EQ(l.size(), 1u);
  EXPECT_EQ(l[0], R"({"type":"kernel","name":"a \"b\"","seq":3})");
  out.close();
  std::remove(path.c_str());
}

// A process killed outright (SIGKILL: no handler runs) keeps every record up to the last flush.
TEST(RecordWriter, KilledProcessKeepsWhatWasFlushed) {
  const std::string path = temp_path("killed");
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    tr::TraceFile out;
    out.adopt(open_buffered(path), path);
    for (int i = 0; i < 300; ++i) out.put(small(i));
    out.flush();  // as the libraries do after a record that matters
    for (int i = 300; i < 310; ++i) out.put(small(i));
    kill(getpid(), SIGKILL);
    _exit(3);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGKILL);
  const std::vector<std::string> l = lines_of(path);
  ASSERT_EQ(l.size(), 300u);
  EXPECT_EQ(l.back(), "{\"type\":\"x\",\"i\":299}");
  std::remove(path.c_str());
}

// A fatal signal whose disposition is the default: the hook writes what is buffered and an end
// record naming the signal, and the process dies of it as it would have.
tr::TraceFile* g_crash_file = nullptr;
void on_fatal(int sig) { g_crash_file->end_at_signal(sig, 7); }

TEST(RecordWriter, FatalSignalEndsTheFileAndTheProgramDiesOfIt) {
  const std::string path = temp_path("signal");
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    static tr::TraceFile out;
    out.adopt(std::fopen(path.c_str(), "w"), path);
    g_crash_file = &out;
    signal(SIGTERM, SIG_DFL);
    tr::install_crash_hook(on_fatal);
    if (!tr::crash_hooked(SIGTERM)) _exit(4);
    for (int i = 0; i < 10; ++i) out.put(small(i));
    raise(SIGTERM);
    _exit(5);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status)) << "exit status " << WEXITSTATUS(status);
  EXPECT_EQ(WTERMSIG(status), SIGTERM);
  const std::vector<std::string> l = lines_of(path);
  ASSERT_EQ(l.size(), 11u);
  EXPECT_TRUE(std::regex_match(l.back(), std::regex(R"(\{"type":"end","end_ns":\d+,"signal":15,"records_dropped":7\})")))
      << l.back();
  std::remove(path.c_str());
}

TEST(RecordWriter, HookLeavesASignalTheProgramHandles) {
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    signal(SIGINT, SIG_IGN);
    tr::install_crash_hook(on_fatal);
    _exit(tr::crash_hooked(SIGINT) ? 1 : 0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

TEST(RecordWriter, FullDiskEndsTheFileNotTheProgram) {
  FILE* full = std::fopen("/dev/full", "w");
  if (!full) GTEST_SKIP() << "no /dev/full";
  tr::TraceFile out;
  out.adopt(full, "/dev/full");
  ::testing::internal::CaptureStderr();
  for (int i = 0; i < 300; ++i) out.put(small(i));
  const std::string said = ::testing::internal::GetCapturedStderr();
  EXPECT_FALSE(out.is_open());
  EXPECT_NE(said.find("writing /dev/full failed"), std::string::npos) << said;
  out.put(small(0));  // nothing, and no crash
  EXPECT_FALSE(out.close());
}

TEST(RecordWriter, ExitHookRunsAtExit) {
  const std::string path = temp_path("exit");
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    static tr::TraceFile out;
    out.adopt(std::fopen(path.c_str(), "w"), path);
    g_crash_file = &out;
    tr::exit_first([] {
      tr::JsonLine("end").unum("end_ns", 1).write(*g_crash_file);
      g_crash_file->close();
    });
    out.put(small(0));
    std::exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  const std::vector<std::string> l = lines_of(path);
  ASSERT_EQ(l.size(), 2u);
  EXPECT_EQ(l[1], R"({"type":"end","end_ns":1})");
  std::remove(path.c_str());
}

TEST(RecordFile, OpenedWhereTheEnvironmentSays) {
  const std::string path = temp_path("env.jsonl");
  setenv("ARCHBENCH_TEST_RECORDS_OUT", path.c_str(), 1);
  tr::TraceFile out;
  ASSERT_TRUE(tr::open_records(out, "ARCHBENCH_TEST_RECORDS_OUT", "unused", "archbench-test", "unobserved"));
  EXPECT_EQ(out.name(), path);
  out.close();
  std::remove(path.c_str());
  setenv("ARCHBENCH_TEST_RECORDS_OUT", "/nonexistent-dir/x.jsonl", 1);
  tr::TraceFile bad;
  ::testing::internal::CaptureStderr();
  EXPECT_FALSE(tr::open_records(bad, "ARCHBENCH_TEST_RECORDS_OUT", "unused", "archbench-test", "unobserved"));
  const std::string said = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(said.rfind("archbench-test: cannot write /nonexistent-dir/x.jsonl (", 0), 0u) << said;
  EXPECT_NE(said.find("; the program runs unobserved\n"), std::string::npos) << said;
  EXPECT_FALSE(bad.is_open());
  unsetenv("ARCHBENCH_TEST_RECORDS_OUT");
}

TEST(RecordFile, ASecondProcessWritesItsOwnBesideIt) {
  // The tool's file exists (the program's first process made it): a process the program started,
  // which inherited the variable, writes <name>-<pid>.jsonl beside it and leaves the first intact.
  const std::string path = temp_path("first.jsonl");
  { std::ofstream(path) << "{\"type\":\"process\"}\n"; }
  setenv("ARCHBENCH_TEST_RECORDS_OUT", path.c_str(), 1);
  tr::TraceFile out;
  ASSERT_TRUE(tr::open_records(out, "ARCHBENCH_TEST_RECORDS_OUT", "unused", "archbench-test", "unobserved"));
  const std::string own = path.substr(0, path.size() - 6) + "-" + std::to_string(getpid()) + ".jsonl";
  EXPECT_EQ(out.name(), own);
  out.close();
  EXPECT_EQ(lines_of(path).size(), 1u);
  std::remove(path.c_str());
  std::remove(own.c_str());
  unsetenv("ARCHBENCH_TEST_RECORDS_OUT");
}

TEST(RecordFile, DefaultNameInTheCurrentDirectory) {
  char before[4096];
  ASSERT_NE(getcwd(before, sizeof before), nullptr);
  const std::string dir = ::testing::TempDir();
  ASSERT_EQ(chdir(dir.c_str()), 0);
  unsetenv("ARCHBENCH_TEST_RECORDS_OUT");
  tr::TraceFile out;
  const bool opened = tr::open_records(out, "ARCHBENCH_TEST_RECORDS_OUT", "records", "archbench-test", "unobserved");
  const std::string expected = "records-" + std::to_string(getpid()) + ".jsonl";
  std::remove(expected.c_str());
  ASSERT_EQ(chdir(before), 0);
  EXPECT_TRUE(opened);
  EXPECT_EQ(out.name(), expected);
  out.close();
}

TEST(RecordFile, ProcessRecord) {
  const std::string line = tr::process_record(42).text();
  const std::regex shape("\\{\"type\":\"process\",\"pid\":" + std::to_string(getpid()) +
                         ",\"command\":\".*\",\"start_ns\":42,\"date\":\"\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\dZ\"\\}\n");
  EXPECT_TRUE(std::regex_match(line, shape)) << line;
}

// Last: guard_fork's handlers stay registered for the rest of the process.
TEST(RecordWriter, ForkedChildNeitherRewritesNorWrites) {
  const std::string path = temp_path("fork");
  static std::mutex mu;
  static tr::TraceFile out;
  out.adopt(std::fopen(path.c_str(), "w"), path);
  tr::guard_fork(mu, out, [] {});
  for (int i = 0; i < 5; ++i) out.put(small(i));  // buffered at the fork
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const bool forgot = !out.is_open();
    out.put(small(99));  // nowhere
    _exit(forgot ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  out.close();
  EXPECT_EQ(lines_of(path).size(), 5u);  // once, by the parent
  std::remove(path.c_str());
}

}  // namespace
