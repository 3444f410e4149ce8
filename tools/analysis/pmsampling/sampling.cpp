// PM sampling's samples: the PM sampling object's calls, the decoding of the hardware buffer into
// counter-data images, their evaluation into level 1, and the decode loop (tools/analysis/pmsampling/inject.cpp
// says how the library works).
#include <cmath>
#include <cstring>
#include <thread>

#include "tools/analysis/pmsampling/pmsampling.hpp"

namespace archbench::pmsampling {

// ---- Samples -------------------------------------------------------------------------------

// The level-1 fractions of one sample, as JSON (null where the SMs executed nothing).
std::string level1(const State& s, const std::vector<double>& v, double dt_ns) {
  const Plan& p = s.plan;
  ab::Metrics m;
  double executed = 0, issued = 0, warps = 0, front = 0, back = 0;
  for (std::size_t i = 0; i < v.size(); ++i) {
    switch (p.roles[i]) {
      case Role::cycles: m["sm__cycles_active.sum"] += v[i]; break;
      case Role::executed: m["sm__inst_executed.sum"] += v[i], executed += v[i]; break;
      case Role::issued: m["sm__inst_issued.sum"] += v[i], issued += v[i]; break;
      case Role::thread: m["smsp__thread_inst_executed.sum"] += v[i]; break;
      case Role::warps: warps += v[i]; break;
      case Role::stall: {
        m[std::string(ab::kStallPrefix) + p.reasons[i] + ".sum"] += v[i];
        const ab::StallClass c = ab::stall_class(p.reasons[i]);
        if (frontend_class(c)) front += v[i];
        if (backend_class(c)) back += v[i];
        break;
      }
      default: break;
    }
  }
  // What was not collected counts as nothing lost to it: no replay, every lane active.
  if (!p.has_issued) m["sm__inst_issued.sum"] = issued = executed;
  if (!p.has_thread) m["smsp__thread_inst_executed.sum"] = executed * 32;
  m["smsp__warps_active.sum"] = warps;
  m["gpu__time_duration.sum"] = dt_ns;
  try {
    const ab::TopDown t = ab::topdown(m);
    std::string j = "{\"retire\":" + number(t.retire);
    if (p.has_thread || p.has_issued) j += ",\"divergence\":" + number(t.divergence);
    const double stall = t.frontend + t.backend;
    if (p.split == Split::full) {
      j += ",\"frontend\":" + number(t.frontend) + ",\"backend\":" + number(t.backend);
    } else if (p.split == Split::partial) {
      // Each counted reason's share of the warps' cycles without an issue (timeline.py: level1).
      const double idle = warps - issued;
      double fs = idle > 0 ? front / idle : 0.0, bs = idle > 0 ? back / idle : 0.0;
      if (fs + bs > 1) {
        const double sum = fs + bs;
        fs /= sum;
        bs /= sum;
      }
      if (p.has_front) j += ",\"frontend\":" + number(stall * fs);
      if (p.has_back) j += ",\"backend\":" + number(stall * bs);
      j += ",\"stall_other\":" + number(stall - stall * fs - stall * bs);
    } else {
      j += ",\"stall\":" + number(stall);
    }
    return j + ",\"ipc\":" + number(t.ipc) + "}";
  } catch (const ab::EmptyRange&) {
    return "null";
  }
}

void reinit_image(State& s, Image& img) {
  const std::uint64_t t0 = tr::now_ns();
  auto init = params<CUpti_PmSampling_CounterDataImage_Initialize_Params>(
      CUpti_PmSampling_CounterDataImage_Initialize_Params_STRUCT_SIZE);
  init.pPmSamplingObject = s.pm;
  init.counterDataSize = img.size;
  init.pCounterData = img.data.get();
  check(cuptiPmSamplingCounterDataImageInitialize(&init), "cuptiPmSamplingCounterDataImageInitialize");
  img.completed = 0;
  ++s.stats.reinits;
  s.stats.reinit_ns += tr::now_ns() - t0;
}

// A fresh image of the same size (not zeroed: CUPTI initialises it).
Image new_image(State& s, std::size_t size) {
  Image img;
  img.data.reset(new std::uint8_t[size]);
  img.size = size;
  reinit_image(s, img);
  return img;
}

// ---- The PM sampling object's calls (the caller holds pm_mu) ----------------------------------

// Enables PM sampling on device `ordinal` (throws saying why it cannot).
void pm_enable(State& s, std::uint32_t ordinal) {
  auto en = params<CUpti_PmSampling_Enable_Params>(CUpti_PmSampling_Enable_Params_STRUCT_SIZE);
  en.deviceIndex = ordinal;
  check(cuptiPmSamplingEnable(&en), "cuptiPmSamplingEnable");
  s.pm = en.pPmSamplingObject;
  s.ordinal = ordinal;
}

// The counter-data image the enabled sampling decodes into: `slots` samples of `metrics`.
void pm_image(State& s, const std::vector<std::string>& metrics, std::uint32_t slots) {
  std::vector<const char*> names;
  for (const std::string& m : metrics) names.push_back(m.c_str());
  auto size = params<CUpti_PmSampling_GetCounterDataSize_Params>(CUpti_PmSampling_GetCounterDataSize_Params_STRUCT_SIZE);
  size.pPmSamplingObject = s.pm;
  size.pMetricNames = names.data();
  size.numMetrics = names.size();
  size.maxSamples = slots;
  check(cuptiPmSamplingGetCounterDataSize(&size), "cuptiPmSamplingGetCounterDataSize");
  s.image = new_image(s, size.counterDataSize);
  s.capacity = slots;
  s.metric_names = metrics;
}

// CUPTI's configuration of the enabled sampling (caller holds pm_mu): `config`, the counter set's
// image, at the settings' interval, hardware buffer and append mode, by `trigger`; kept for a
// restart (slow_down) where CUPTI takes it.
CUptiResult set_config(State& s, const std::vector<std::uint8_t>& config, CUpti_PmSampling_TriggerMode trigger) {
  auto set = params<CUpti_PmSampling_SetConfig_Params>(CUpti_PmSampling_SetConfig_Params_STRUCT_SIZE);
  set.pPmSamplingObject = s.pm;
  set.configSize = config.size();
  set.pConfig = config.data();
  set.hardwareBufferSize = s.cfg.hw_buffer;
  set.samplingInterval = s.cfg.interval_ns;
  set.triggerMode = trigger;
  set.hwBufferAppendMode = s.cfg.keep_latest ? CUPTI_PM_SAMPLING_HARDWARE_BUFFER_APPEND_MODE_KEEP_LATEST
                                             : CUPTI_PM_SAMPLING_HARDWARE_BUFFER_APPEND_MODE_KEEP_OLDEST;
  const CUptiResult r = cuptiPmSamplingSetConfig(&set);
  if (r == CUPTI_SUCCESS) {
    if (&config != &s.config_used) s.config_used = config;
    s.trigger_mode = trigger;
  }
  return r;
}

CUptiResult pm_start(State& s) {
  auto p = params<CUpti_PmSampling_Start_Params>(CUpti_PmSampling_Start_Params_STRUCT_SIZE);
  p.pPmSamplingObject = s.pm;
  return cuptiPmSamplingStart(&p);
}

CUptiResult pm_stop(State& s) {
  auto p = params<CUpti_PmSampling_Stop_Params>(CUpti_PmSampling_Stop_Params_STRUCT_SIZE);
  p.pPmSamplingObject = s.pm;
  return cuptiPmSamplingStop(&p);
}

// Disables it; the object is gone whatever CUPTI answers.
CUptiResult pm_disable(State& s) {
  auto p = params<CUpti_PmSampling_Disable_Params>(CUpti_PmSampling_Disable_Params_STRUCT_SIZE);
  p.pPmSamplingObject = s.pm;
  const CUptiResult r = cuptiPmSamplingDisable(&p);
  s.pm = nullptr;
  return r;
}

// A line for each sample of `img` CUPTI completed (the host object's values and the level-1
// fractions), written out.
void evaluate(State& s, const Image& img) {
  const std::uint64_t empty0 = s.stats.empty;
  std::vector<double> values(s.plan.roles.size());
  std::vector<tr::JsonLine> lines;
  for (std::size_t i = 0; i < img.completed; ++i) {
    auto si = params<CUpti_PmSampling_CounterData_GetSampleInfo_Params>(
        CUpti_PmSampling_CounterData_GetSampleInfo_Params_STRUCT_SIZE);
    si.pPmSamplingObject = s.pm;
    si.pCounterDataImage = img.data.get();
    si.counterDataImageSize = img.size;
    si.sampleIndex = i;
    if (cuptiPmSamplingCounterDataGetSampleInfo(&si) != CUPTI_SUCCESS || si.startTimestamp == 0) {
      ++s.stats.lost;  // a slot without time: its sample is gone
      continue;
    }
    if (si.endTimestamp <= si.startTimestamp || si.endTimestamp <= s.last_end) {
      ++s.stats.empty;  // covers no time (as after a stop), or was written already
      continue;
    }
    s.last_end = si.endTimestamp;
    if (s.drop_next) {
      s.drop_next = false;
      continue;
    }
    auto ev = params<CUpti_Profiler_Host_EvaluateToGpuValues_Params>(CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE);
    ev.pHostObject = s.host->get();
    ev.pCounterDataImage = img.data.get();
    ev.counterDataImageSize = img.size;
    ev.rangeIndex = i;
    ev.ppMetricNames = s.host->names().data();
    ev.numMetrics = s.host->names().size();
    ev.pMetricValues = values.data();
    if (cuptiProfilerHostEvaluateToGpuValues(&ev) != CUPTI_SUCCESS) {
      ++s.stats.lost;
      continue;
    }
    std::string v = "[";
    for (double x : values) {
      if (v.size() > 1) v += ',';
      v += number(x);
    }
    const std::string l1 = level1(s, values, double(si.endTimestamp - si.startTimestamp));
    if (l1 == "null") ++s.stats.idle;
    tr::JsonLine line("sample");
    line.unum("i", s.stats.samples++).unum("start", si.startTimestamp).unum("end", si.endTimestamp)
        .raw("values", v + "]").raw("level1", l1);
    lines.push_back(std::move(line));
  }
  // Most of a full image without time: the decoding has fallen behind (slow_down).
  if (img.completed >= 64 && 2 * (s.stats.empty - empty0) >= img.completed) s.behind = true;
  std::lock_guard<std::mutex> lock(s.out_mu);
  if (getpid() == s.pid) {
    for (tr::JsonLine& l : lines) s.out.put(l);
    s.out.flush();
  }
}

// One decode of the hardware buffer into the image (caller holds pm_mu). With the host object
// there, the images set aside before it are evaluated, then this one, which is initialised again
// for the next decode; without it (a cached config image started the sampling before the host
// object was built), an image with samples is set aside and a fresh one takes its place, so that
// the hardware buffer keeps being emptied. A sample still being written stays in the hardware
// buffer for the next decode. The image holds two decodes' samples; where it fills, the rest
// stays in the hardware buffer and this returns true (decode again).
bool decode(State& s, bool host) {
  if (!s.pm || (s.stats.overflow && !s.cfg.keep_latest)) return false;
  const std::uint64_t t0 = tr::now_ns();
  if (host && !s.pending.empty()) {
    for (const Image& img : s.pending) evaluate(s, img);
    s.pending.clear();
  }
  auto dec = params<CUpti_PmSampling_DecodeData_Params>(CUpti_PmSampling_DecodeData_Params_STRUCT_SIZE);
  dec.pPmSamplingObject = s.pm;
  dec.pCounterDataImage = s.image.data.get();
  dec.counterDataImageSize = s.image.size;
  const CUptiResult r = cuptiPmSamplingDecodeData(&dec);
  ++s.stats.decodes;
  if ((r == CUPTI_ERROR_OUT_OF_MEMORY || dec.overflow) && !s.stats.overflow) {
    // Keeping the oldest records, an overflow is permanent: later decodes return nothing.
    s.stats.overflow = true;
    const std::string why = "the PM sampling hardware buffer overflowed: samples after " +
                            std::to_string(s.stats.samples + s.stats.set_aside) +
                            " are lost (raise ARCHBENCH_PM_HW_BUFFER_MB or ARCHBENCH_PM_INTERVAL_US, or lower "
                            "ARCHBENCH_PM_DECODE_MS)";
    std::fprintf(stderr, "%s: %s\n", kTag, why.c_str());
    emit(s, std::move(tr::JsonLine("error").str("reason", why).unum("host_ns", tr::now_ns())), true);
    if (r != CUPTI_SUCCESS) return false;
  } else if (r != CUPTI_SUCCESS) {
    ++s.stats.decode_errors;
    s.stats.last_error = "cuptiPmSamplingDecodeData: " + cupti_words(r);
    return false;
  }
  auto info = params<CUpti_PmSampling_GetCounterDataInfo_Params>(CUpti_PmSampling_GetCounterDataInfo_Params_STRUCT_SIZE);
  info.pCounterDataImage = s.image.data.get();
  info.counterDataImageSize = s.image.size;
  check(cuptiPmSamplingGetCounterDataInfo(&info), "cuptiPmSamplingGetCounterDataInfo");
  s.image.completed = std::min(info.numCompletedSamples, s.capacity);
  s.stats.most_per_decode = std::max<std::uint64_t>(s.stats.most_per_decode, s.image.completed);
  const bool full = dec.decodeStopReason == CUPTI_PM_SAMPLING_DECODE_STOP_REASON_COUNTER_DATA_FULL;
  if (full) ++s.stats.full;
  if (host) {
    evaluate(s, s.image);
    rearm_exit(Rearm::decoded);  // after the first evaluation's statics too
    if (full || info.numPopulatedSamples > 0) reinit_image(s, s.image);
  } else if (full || info.numPopulatedSamples > 0) {
    s.stats.set_aside += s.image.completed;
    s.pending.push_back(std::move(s.image));
    s.image = new_image(s, s.pending.back().size);
  }
  const std::uint64_t dt = tr::now_ns() - t0;
  s.stats.decode_ns += dt;
  s.stats.decode_max_ns = std::max(s.stats.decode_max_ns, dt);
  return full;
}

// ---- Start, the decode loop, stop -----------------------------------------------------------

void clock_line(State& s, const char* when) {
  timespec rt;
  const std::uint64_t a = tr::now_ns();
  std::uint64_t cupti = 0;
  cuptiGetTimestamp(&cupti);
  const std::uint64_t b = tr::now_ns();
  clock_gettime(CLOCK_REALTIME, &rt);
  emit(s, std::move(tr::JsonLine("clock").str("when", when).unum("mono_ns", a + (b - a) / 2).unum("cupti_ns", cupti)
                        .unum("realtime_ns", std::uint64_t(rt.tv_sec) * 1000000000ull + std::uint64_t(rt.tv_nsec))),
       true);
}

// The last decodes and the stop, on the thread that decoded all along, before it ends: made on
// the program's thread at its exit or at cudaDeviceReset (after this thread had ended), the
// decode crashed the program (SIGSEGV in libnvperf_host on the H100).
void last_decode(State& s) {
  {
    std::lock_guard<std::mutex> hl(s.host_mu);
    if (!s.host_ready) return;  // finish waits for the host object and says what it could do
  }
  std::unique_lock<std::timed_mutex> pm(s.pm_mu, std::defer_lock);
  if (!pm.try_lock_for(std::chrono::seconds(5)) || s.stopped || !s.sampling || !s.pm) return;
  try {
    const std::uint64_t t0 = tr::now_ns();
    for (int i = 0; i < 16 && decode(s, true); ++i) {
    }
    const std::uint64_t t1 = tr::now_ns();
    s.last_decode_ns = t1 - t0;
    check(pm_stop(s), "cuptiPmSamplingStop");
    s.last_stop_ns = tr::now_ns() - t1;
  } catch (const std::exception& e) {
    ++s.stats.decode_errors;
    s.stats.last_error = e.what();
  }
  s.stopped = true;
  clock_line(s, "end");
}

// archbench_pmsampler only (ARCHBENCH_PM_SLOW_DOWN=0: never). CUPTI decodes a sample in 40-100 us,
// about as long as the default interval, so on a busy run of more than about half a second the
// decoding falls behind; the records decoded into a full image then carry one repeated timestamp,
// and go on doing so after a stop and a new configuration. Disabled and enabled again, the sampling
// recovers: it restarts here at ten times the interval, up to 1 ms, after a gap of about 0.45 s on
// an H100 (gpu-stream, 5.5 s: all six kernels sampled to the end, against the first 0.4 s without
// this). Said in an `interval` record; the program, in another process, never waits for it.
void slow_down(State& s) {
  s.behind = false;
  if (!s.cfg.sampler || !s.cfg.adapt || s.cfg.interval_ns >= 1000000 || !s.pm || s.stopped) return;
  const std::uint64_t t0 = tr::now_ns(), from = s.cfg.interval_ns;
  std::string error;
  try {
    check(pm_stop(s), "cuptiPmSamplingStop");
    check(pm_disable(s), "cuptiPmSamplingDisable");
    pm_enable(s, s.ordinal);
    s.cfg.interval_ns = std::min<std::uint64_t>(from * 10, 1000000);
    pm_image(s, s.metric_names, std::uint32_t(s.capacity));
    check(set_config(s, s.config_used, s.trigger_mode), "cuptiPmSamplingSetConfig");
    check(pm_start(s), "cuptiPmSamplingStart");
    s.drop_next = true;
  } catch (const std::exception& e) {
    error = e.what();  // nothing more comes: the report's coverage says how much of the run was sampled
    s.stopped = true;
  }
  emit(s, std::move(tr::JsonLine("interval").unum("from_ns", from).unum("interval_ns", s.cfg.interval_ns)
                        .unum("host_ns", t0).unum("gap_ns", tr::now_ns() - t0)
                        .str("why", "the decoding fell behind (most of a full image's records had no time)")
                        .str("error", error)),
       true);
}

// Decodes every decode period until told to stop (the setup thread's, or a thread of its own).
void decode_loop() {
  State& s = state();
  const auto period = std::chrono::milliseconds(s.cfg.decode_ms);
  auto last_flush = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lk(s.ctl_mu);
  while (!s.stop_thread) {
    s.ctl_cv.wait_for(lk, period, [&] { return s.stop_thread; });
    if (s.stop_thread) break;
    lk.unlock();
    bool host;
    {
      std::lock_guard<std::mutex> hl(s.host_mu);
      host = s.host_ready;  // until the host object is there, decoded images are set aside
    }
    {
      std::unique_lock<std::timed_mutex> pm(s.pm_mu, std::try_to_lock);
      if (pm.owns_lock() && !s.stopped) try {
          for (int i = 0; i < 4 && decode(s, host); ++i) {
          }
          if (s.behind) slow_down(s);
        } catch (const std::exception& e) {
          ++s.stats.decode_errors;
          s.stats.last_error = e.what();
        } catch (...) {
          ++s.stats.decode_errors;
        }
    }
    // Kernel records as the run goes (CUPTI calls back on this thread: no lock of ours is held).
    if (s.activity_on && std::chrono::steady_clock::now() - last_flush > std::chrono::seconds(1)) {
      cuptiActivityFlushAll(0);
      last_flush = std::chrono::steady_clock::now();
    }
    lk.lock();
  }
  lk.unlock();
  last_decode(s);
  lk.lock();
  s.thread_running = false;
  s.ctl_cv.notify_all();
}

}  // namespace archbench::pmsampling
