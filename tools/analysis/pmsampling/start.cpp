// The start of PM sampling on a device: the host side prepared (chip, counter availability, the
// one-pass set and its config image), the device locked, enabled, configured and started, early
// or at the first context or launch (tools/analysis/pmsampling/inject.cpp says how and why).
#include <cupti_profiler_target.h>
#include <cupti_target.h>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <thread>

#include "tools/analysis/pmsampling/pmsampling.hpp"

namespace archbench::pmsampling {

// Starts `body` on a thread of the library with every signal blocked (it never takes one of the
// program's); false where no thread could be made.
bool spawn(void (*body)(), const char* what) {
  State& s = state();
  {
    std::lock_guard<std::mutex> lk(s.ctl_mu);
    s.thread_running = true;
  }
  const bool ok = tr::spawn_quiet(body);
  if (!ok) {
    std::lock_guard<std::mutex> lk(s.ctl_mu);
    s.thread_running = false;
    std::fprintf(stderr, "%s: no %s thread\n", kTag, what);
  }
  return ok;
}

// The host object for evaluating samples, built on a helper thread (the cached config image lets the
// sampling start without it): a `host` record says how long it took.
void build_host(std::string chip, std::vector<std::uint8_t> availability, std::vector<std::string> metrics,
                std::vector<std::uint8_t> config) {
  State& s = state();
  Times t;
  std::unique_ptr<Host> h;
  std::string error, note;
  try {
    h = std::make_unique<Host>(chip, availability);
    t.lap("init_ns");
    const std::size_t passes = h->configure(metrics);
    t.lap("configure_ns");
    if (passes != 1)
      error = "the cached set needs " + std::to_string(passes) + " passes now (remove the cache file: ARCHBENCH_PM_CACHE)";
    else if (h->image() != config)
      note = "the cached config image differs from the host object's (the cached one is in use)";
  } catch (const std::exception& e) {
    error = e.what();
  }
  const std::uint64_t ready = tr::now_ns();
  tr::JsonLine line("host");  // written before finish can be told the host object is there
  line.raw("times", t.json()).unum("since_start_ns", ready - s.host_started_ns).unum("ready_ns", ready);
  if (!note.empty()) line.str("note", note);
  if (!error.empty()) line.str("error", error);
  emit(s, std::move(line), true);
  {
    std::lock_guard<std::mutex> lk(s.host_mu);
    if (error.empty()) s.host = std::move(h), s.host_ready = true;
    else s.host_failed = true;
    s.host_cv.notify_all();
  }
  if (!error.empty()) fail(s, "the samples cannot be evaluated: " + error);
}

void start_host_builder(State& s, const std::string& chip, const std::vector<std::uint8_t>& availability,
                        const std::vector<std::string>& metrics, const std::vector<std::uint8_t>& config) {
  s.host_started_ns = tr::now_ns();
  if (!tr::spawn_quiet([=] { build_host(chip, availability, metrics, config); }))
    build_host(chip, availability, metrics, config);  // built here, then
}

std::unique_ptr<Prep> prepare(State& s, std::uint32_t ordinal, Times& t) {
  auto p = std::make_unique<Prep>();
  p->ordinal = ordinal;
  CUdevice dev = 0;
  char name[256] = "", bus[32] = "";
  if (cuDeviceGet(&dev, int(ordinal)) == CUDA_SUCCESS) {
    cuDeviceGetName(name, sizeof name, dev);
    cuDeviceGetPCIBusId(bus, sizeof bus, dev);
  }
  p->name = name;
  p->bus = bus;
  auto init = params<CUpti_Profiler_Initialize_Params>(CUpti_Profiler_Initialize_Params_STRUCT_SIZE);
  if (const CUptiResult r = cuptiProfilerInitialize(&init); r != CUPTI_ERROR_INVALID_OPERATION)  // done already
    check(r, "cuptiProfilerInitialize");
  t.lap("profiler_init_ns");
  auto sup = params<CUpti_Profiler_DeviceSupported_Params>(CUpti_Profiler_DeviceSupported_Params_STRUCT_SIZE);
  sup.cuDevice = dev;
  sup.api = CUPTI_PROFILER_PM_SAMPLING;
  if (cuptiProfilerDeviceSupported(&sup) == CUPTI_SUCCESS && sup.isSupported != CUPTI_PROFILER_CONFIGURATION_SUPPORTED) {
    std::string why = "PM sampling is not supported on this device";
    if (sup.architecture != CUPTI_PROFILER_CONFIGURATION_SUPPORTED) why += " (architecture)";
    if (sup.vGpu == CUPTI_PROFILER_CONFIGURATION_DISABLED) why += " (vGPU with profiling disabled)";
    else if (sup.vGpu != CUPTI_PROFILER_CONFIGURATION_SUPPORTED) why += " (vGPU)";
    if (sup.confidentialCompute != CUPTI_PROFILER_CONFIGURATION_SUPPORTED) why += " (confidential computing)";
    if (sup.cmp != CUPTI_PROFILER_CONFIGURATION_SUPPORTED) why += " (CMP)";
    if (sup.wsl != CUPTI_PROFILER_CONFIGURATION_SUPPORTED) why += " (WSL)";
    throw std::runtime_error(why);
  }
  auto chip = params<CUpti_Device_GetChipName_Params>(CUpti_Device_GetChipName_Params_STRUCT_SIZE);
  chip.deviceIndex = ordinal;
  check(cuptiDeviceGetChipName(&chip), "cuptiDeviceGetChipName");
  p->chip = chip.pChipName ? chip.pChipName : "";
  t.lap("chip_ns");
  // The counter availability image: the cache's where it holds one with its config image (the
  // query took 0.17 s on an H100, on the path to the first launch; a set the device then refuses
  // fails at cuptiPmSamplingSetConfig, which says why), else the device's.
  std::unique_ptr<Cached> cached = s.cfg.metrics.empty() ? read_cache(cache_path(s.cfg, p->chip), p->chip) : nullptr;
  auto query_availability = [&] {
    auto avail = params<CUpti_PmSampling_GetCounterAvailability_Params>(
        CUpti_PmSampling_GetCounterAvailability_Params_STRUCT_SIZE);
    avail.deviceIndex = ordinal;
    check(cuptiPmSamplingGetCounterAvailability(&avail), "cuptiPmSamplingGetCounterAvailability");
    p->availability.resize(avail.counterAvailabilityImageSize);
    avail.pCounterAvailabilityImage = p->availability.data();
    check(cuptiPmSamplingGetCounterAvailability(&avail), "cuptiPmSamplingGetCounterAvailability");
    t.lap("availability_ns");
  };
  if (cached && !cached->config.empty() && !cached->availability.empty()) {
    p->availability = cached->availability;
    t.lap("availability_cached_ns");
  } else {
    query_availability();
  }
  // The chip's counters are listed only where the set is not cached (a cache hit: one host object;
  // a cached set that no longer takes one pass: listed, and searched again).
  std::vector<std::string> base;
  auto list = [&] {
    Host lister(p->chip, p->availability);
    t.lap("host_init_ns");
    base = lister.base_metrics();
    t.lap("base_metrics_ns");
    emit(s, std::move(tr::JsonLine("base_metrics").str("chip", p->chip).raw("metrics", json_strings(base))));
  };
  if (!cached) list();
  try {
    p->choice = choose(s.cfg, p->chip, p->availability, base, cached.get(), t);
  } catch (const std::exception&) {
    if (!cached) throw;
    if (p->availability == cached->availability) query_availability();
    list();
    p->choice = choose(s.cfg, p->chip, p->availability, base, nullptr, t);
  }
  p->base_count = base.size();
  if (!p->choice.host) start_host_builder(s, p->chip, p->availability, p->choice.metrics, p->choice.config);
  return p;
}

// Takes the GPU's lock (ARCHBENCH_PM_LOCK_DIR, default /tmp: archbench-pmsampling-<PCI bus>.lock),
// held until the process ends; throws where another process holds it. A second PM-sampling
// session's enable stops the first one's samples (seen on the H100: the first kept 1 sample) before
// CUPTI refuses its configuration, so two archbench timelines on one GPU never try at once.
void lock_device(State& s, const Prep& prep) {
  if (s.device_lock >= 0) return;
  const char* dir = std::getenv("ARCHBENCH_PM_LOCK_DIR");
  const std::string path = std::string(dir && *dir ? dir : "/tmp") + "/archbench-pmsampling-" +
                           (prep.bus.empty() ? std::to_string(prep.ordinal) : prep.bus) + ".lock";
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  if (fd < 0) fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);  // another user's file
  if (fd < 0) return;  // no lock to be had: CUPTI alone decides
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    char pid[32] = "";
    const ssize_t n = pread(fd, pid, sizeof pid - 1, 0);
    pid[n > 0 ? n : 0] = '\0';
    close(fd);
    std::string who = pid;
    while (!who.empty() && std::isspace(static_cast<unsigned char>(who.back()))) who.pop_back();
    throw std::runtime_error("another archbench timeline samples this GPU (process " + (who.empty() ? "?" : who) +
                             ", " + path + "): not started, which would have stopped its sampling");
  }
  if (ftruncate(fd, 0) == 0) {
    const std::string me = std::to_string(getpid()) + "\n";
    if (pwrite(fd, me.data(), me.size(), 0) < 0) {
    }
  }
  s.device_lock = fd;
}

// Enables PM sampling on the prepared device, with a counter-data image and hardware buffer sized
// to the interval and the decode period, and starts it (throws saying why it cannot); writes the
// config record with the setup's times (`t`).
void start_device(State& s, Prep& prep, Times& t, const std::string& start_how) {
  lock_device(s, prep);
  Plan plan = plan_of(prep.choice.metrics, prep.choice.chip_reasons);
  plan.notes.insert(plan.notes.end(), prep.choice.notes.begin(), prep.choice.notes.end());
  const std::vector<std::string> metrics = prep.choice.metrics;
  std::unique_lock<std::timed_mutex> pm(s.pm_mu);
  pm_enable(s, prep.ordinal);
  t.lap("enable_ns");
  if (prep.choice.host) {
    std::lock_guard<std::mutex> lk(s.host_mu);
    s.host = std::move(prep.choice.host);
    s.host_ready = true;
  }
  s.plan = plan;
  std::string trigger = "gpu time";
  std::size_t slot = 0;
  const double per_decode = double(s.cfg.decode_ms) * 1e6 / double(std::max<std::uint64_t>(s.cfg.interval_ns, 1));
  try {
    // The image: two decodes' samples and 64 more (a decode that fills it decodes again).
    const std::uint32_t slots =
        s.cfg.max_samples ? s.cfg.max_samples : std::uint32_t(std::clamp(2 * per_decode + 64, 128.0, 16384.0));
    pm_image(s, metrics, slots);
    slot = s.image.size / std::max<std::uint32_t>(slots, 1);
    s.stats.reinits = 0;
    s.stats.reinit_ns = 0;
    t.lap("counter_data_ns");
    // The hardware buffer: 8 decodes' samples at the image's size per sample (the raw records are
    // not larger), 32 to 512 MB, unless given; in archbench_pmsampler's process 512 MB (CUPTI
    // Python's default): a 5.5 s memory-bound run on an H100 overflowed 74 MB, as the first decodes
    // waited for the host object, and none of six overflowed 512 MB (where the decoding falls
    // behind all the same, slow_down restarts the sampling).
    std::size_t hw = s.cfg.hw_buffer;
    if (!hw && s.cfg.sampler) hw = std::size_t(512) << 20;
    if (!hw) {
      const double want = double(slot) * std::max(per_decode, 1.0) * 8;
      hw = std::size_t(std::clamp(std::ceil(want / double(1 << 20)), 32.0, 512.0)) << 20;
    }
    s.cfg.hw_buffer = hw;
    const std::vector<std::uint8_t>* config = &prep.choice.config;
    CUptiResult r = set_config(s, *config, CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_TIME_INTERVAL);
    if (r != CUPTI_SUCCESS && !prep.choice.host && wait_for_host(s, std::chrono::seconds(10))) {
      config = &s.host->image();  // the cached image refused: the host object's
      r = set_config(s, *config, CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_TIME_INTERVAL);
    }
    if (r != CUPTI_SUCCESS) {
      // Chips without the time trigger (Turing, GA100): the interval in SYS clock cycles, taken at 1 GHz.
      const std::string first = "cuptiPmSamplingSetConfig (GPU time trigger: " + cupti_words(r) + "; SYS clock trigger)";
      check(set_config(s, *config, CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_SYSCLK_INTERVAL), first.c_str());
      trigger = "sysclk cycles (interval taken at 1 GHz)";
    }
    t.lap("set_config_ns");
    check(pm_start(s), "cuptiPmSamplingStart");
    t.lap("start_ns");
    rearm_exit(Rearm::started);
  } catch (...) {  // leave the device as it was
    pm_disable(s);
    throw;
  }
  const std::uint64_t started = tr::now_ns();
  pm.unlock();
  clock_line(s, "start");
  std::uint64_t total = 0;
  for (const auto& [k, v] : t.parts)
    if (k != "cu_init_ns" && k != "waited_for_context_ns") total += v;
  const Choice& c = prep.choice;
  emit(s, std::move(tr::JsonLine("config")
                        .str("chip", prep.chip).unum("device", prep.ordinal).str("device_name", prep.name)
                        .str("pci_bus_id", prep.bus).unum("interval_ns", s.cfg.interval_ns).str("trigger", trigger)
                        .unum("hw_buffer_bytes", s.cfg.hw_buffer).unum("max_samples", s.capacity)
                        .unum("counter_data_bytes", s.image.size).unum("counter_data_sample_bytes", slot)
                        .unum("decode_ms", s.cfg.decode_ms).str("append", s.cfg.keep_latest ? "latest" : "oldest")
                        .unum("passes", 1).raw("metrics", json_strings(metrics)).raw("roles", json_object(plan.roles_json))
                        .raw("stall_class", json_object(plan.classes)).raw("level1", json_strings(plan.quantities))
                        .str("split", plan.split == Split::full ? "full" : plan.split == Split::partial ? "partial" : "none")
                        .raw("notes", json_strings(plan.notes)).raw("approximations", json_strings(plan.approximations))
                        .raw("not_collected", json_object(c.rejected)).str("selection", c.how)
                        .unum("selection_trials", c.trials).raw("search", c.search).unum("base_metrics", prep.base_count)
                        .unum("chip_stall_reasons", c.chip_reasons.size()).str("activity", s.activity)
                        .str("start", start_how).raw("setup", t.json()).unum("setup_ns", total)
                        .unum("start_ns", started)),
       true);
  s.sampling = true;
  std::string q;
  for (const std::string& x : plan.quantities) q += (q.empty() ? "" : ", ") + x;
  std::fprintf(stderr, "%s: sampling %s every %g us (%zu counters, one pass: %s)\n", kTag, prep.name.c_str(),
               double(s.cfg.interval_ns) / 1e3, metrics.size(), q.c_str());
}

// ARCHBENCH_PM_START=early: where the process sees one device and no context has asked yet, the
// sampling starts there now, ahead of the program's context (PM sampling is the device's, not a
// context's), so that the program's context creation and its first steps hide CUPTI's enable and
// set-up (0.1-0.15 s on an H100, on the first launch's path otherwise). Where it sees several
// devices, or the start fails, it waits for the first context as `context` does (said in the
// config record's `start`). Returns how the start was made, or why not ahead.
std::string start_early(State& s, Prep& prep, Times& t) {
  int count = 0;
  if (s.cfg.device < 0 && (cuDeviceGetCount(&count) != CUDA_SUCCESS || count != 1))
    return "context (not ahead: " + std::to_string(count) + " devices, the first context's sampled)";
  {
    std::lock_guard<std::mutex> lk(s.ctl_mu);
    if (s.want_device >= 0 || s.stop_thread) return "context (a context came first)";
    s.want_device = int(prep.ordinal);  // a context created meanwhile is only recorded (ask_for)
    s.trigger = "library loaded (one device)";
    s.trigger_ns = tr::now_ns();
    s.phase = Phase::starting;
  }
  try {
    start_device(s, prep, t, "early (one device, ahead of the program's context)");
    return std::string();
  } catch (const std::exception& e) {
    std::lock_guard<std::mutex> lk(s.ctl_mu);
    if (!s.ctx) s.want_device = -1;  // the first context will ask again
    else s.trigger = "context created";  // it asked meanwhile
    s.phase = Phase::prepared;
    return std::string("context (not ahead: ") + e.what() + ")";
  }
}

// The library's thread (ARCHBENCH_PM_START early, context or launch): prepares as soon as the
// driver is initialised, starts the sampling at once (early, one device) or on the device asked
// for (the first context's, or the first launch's), then decodes until the end.
void setup_main() {
  State& s = state();
  Times t;
  {  // the driver's initialisation is the program's cuInit, which loaded this library: let it return
    std::unique_lock<std::mutex> lk(s.ctl_mu);
    s.ctl_cv.wait_for(lk, std::chrono::seconds(10), [&] { return s.injection_done || s.stop_thread; });
    s.phase = Phase::preparing;
  }
  const CUresult r = tr::driver_ready();
  t.lap("cu_init_ns");
  std::unique_ptr<Prep> prep;
  std::string error;
  if (r != CUDA_SUCCESS) {
    error = "cuInit: " + tr::cu_words(r);  // no device: the program says so itself
  } else {
    try {
      prep = prepare(s, std::uint32_t(std::max(s.cfg.device, 0)), t);
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
  int device = -1;
  std::string start_how = s.cfg.start;
  if (prep && s.cfg.start == "early") start_how = start_early(s, *prep, t);
  if (s.cfg.sampler && !s.sampling && error.empty())
    error = "archbench_pmsampler could not start the sampling ahead of the program: " + start_how;
  if (s.sampling) {
    device = int(prep->ordinal);
  } else if (error.empty()) {
    std::unique_lock<std::mutex> lk(s.ctl_mu);
    if (prep) {
      s.phase = Phase::prepared;
      s.ctl_cv.notify_all();
      const std::uint64_t w0 = tr::now_ns();
      s.ctl_cv.wait(lk, [&] { return s.want_device >= 0 || s.stop_thread; });
      t.put("waited_for_context_ns", tr::now_ns() - w0);
      t.last = tr::now_ns();
      device = s.stop_thread ? -1 : s.want_device;
      start_how += " (" + s.trigger + ")";
      if (device >= 0) s.phase = Phase::starting;
    }
  }
  if (!error.empty()) {
    if (r == CUDA_SUCCESS) fail(s, error);
    else emit(s, std::move(tr::JsonLine("error").str("reason", error).unum("host_ns", tr::now_ns())), true);
  } else if (device >= 0 && !s.sampling) {
    try {
      if (std::uint32_t(device) != prep->ordinal) prep = prepare(s, std::uint32_t(device), t);
      start_device(s, *prep, t, start_how);
    } catch (const std::exception& e) {
      fail(s, e.what());
    }
  }
  set_phase(s, s.sampling ? Phase::sampling : (device >= 0 || !error.empty() ? Phase::failed : Phase::stopped));
  if (s.sampling) {
    decode_loop();
    return;
  }
  std::lock_guard<std::mutex> lk(s.ctl_mu);
  s.thread_running = false;
  s.ctl_cv.notify_all();
}

// The setup thread's body: setup_main, then a word that it has returned, so that finish can wait
// until the thread's own objects (CUPTI's among them) are destroyed before the process goes on
// with its exit (an uncached first run, whose search made them, hung or died at exit otherwise).
void setup_entry() {
  setup_main();
  State& s = state();
  std::lock_guard<std::mutex> lk(s.ctl_mu);
  s.setup_returned = true;
  s.ctl_cv.notify_all();
}

}  // namespace archbench::pmsampling
