// The CUDA tracer's Activity API side: CUPTI's device records, joined to the calls behind them by
// correlation id and written once those calls have returned; devices and queues as they are used
// (tools/analysis/trace/cuda_injection.cpp says how the tracer works).
#include "tools/analysis/trace/cuda_tracer.hpp"

namespace archbench::trace_cuda {

// Every device the program could use, read once the driver is up (at the first context), as
// device records. Called without the lock: it calls the driver.
void list_devices() {
  State& s = st();
  t_inside = true;
  int n = 0;
  std::vector<std::string> names;
  if (cuDeviceGetCount(&n) == CUDA_SUCCESS)
    for (int i = 0; i < n; ++i) {
      CUdevice dev;
      char name[256] = "?";
      if (cuDeviceGet(&dev, i) == CUDA_SUCCESS) cuDeviceGetName(name, sizeof name, dev);
      names.emplace_back(name);
    }
  t_inside = false;
  std::lock_guard<std::mutex> lock(s.mu);
  if (!s.device_names.empty() || s.done) return;
  s.device_names = names;
  for (size_t i = 0; i < names.size(); ++i) {
    tr::JsonLine j("device");
    s.out.put(j.str("id", "cuda:" + std::to_string(i)).str("name", names[i]).boolean("used", s.used_devices.count(uint32_t(i)) > 0));
  }
}

// A device ran something, or has a context: its record again, now used (the reader keeps the
// last). Caller holds the lock.
void note_device(uint32_t dev) {
  State& s = st();
  if (!s.used_devices.insert(dev).second || s.done) return;
  tr::JsonLine j("device");
  s.out.put(j.str("id", "cuda:" + std::to_string(dev))
                .str("name", dev < s.device_names.size() ? s.device_names[dev] : std::string("?")).boolean("used", true));
}

std::string queue_id(uint32_t context, uint32_t stream) {
  return "ctx" + std::to_string(context) + "/stream" + std::to_string(stream);
}

// A stream that ran something: its queue record, written again when what is known of it changes
// (its device, whether it is its context's legacy default stream). Caller holds the lock.
void note_queue(uint32_t ctx, uint32_t stream) {
  State& s = st();
  auto dev = s.ctx_device.find(ctx);
  auto ns = s.null_stream.find(ctx);
  // Every CUDA stream runs its work in order; the legacy default stream also waits for, and
  // holds, every other blocking stream of its context.
  tr::JsonLine j("queue");
  j.str("id", queue_id(ctx, stream))
      .str("device", dev == s.ctx_device.end() ? std::string("?") : "cuda:" + std::to_string(dev->second))
      .boolean("in_order", true).boolean("profiling_added", false)
      .boolean("default_stream", ns != s.null_stream.end() && ns->second == stream);
  std::string& written = s.queues[{ctx, stream}];
  if (s.done) return;
  std::string line = j.text();
  if (line == written) return;
  written = line;
  s.out.put(line);
}

const char* memory_kind(uint8_t k) {
  switch (k) {
    case CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE: return "pageable";
    case CUPTI_ACTIVITY_MEMORY_KIND_PINNED: return "pinned";
    case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED:
    case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED_STATIC: return "managed";
    case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE:
    case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC:
    case CUPTI_ACTIVITY_MEMORY_KIND_ARRAY: return "device";
    default: return "unknown";
  }
}

void take(const CUpti_Activity* r) {
  State& s = st();
  int64_t o = s.clock_offset;
  switch (r->kind) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
      auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(r);
      s.kernels.push_back({tr::demangle(k->name), k->deviceId, k->contextId, k->streamId, k->correlationId,
                           {k->gridX, k->gridY, k->gridZ}, {k->blockX, k->blockY, k->blockZ},
                           k->queued ? k->queued + o : 0, k->submitted ? k->submitted + o : 0, k->start + o, k->end + o});
      note_queue(k->contextId, k->streamId);
      note_device(k->deviceId);
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(r);
      const char* kind = "d2d";
      uint8_t host = m->dstKind;
      switch (m->copyKind) {
        case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD:
        case CUPTI_ACTIVITY_MEMCPY_KIND_HTOA: kind = "h2d"; host = m->srcKind; break;
        case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH:
        case CUPTI_ACTIVITY_MEMCPY_KIND_ATOH: kind = "d2h"; break;
        case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH: kind = "h2h"; break;
        default: break;
      }
      s.copies.push_back({kind, memory_kind(host), !(m->flags & CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC),
                          m->copyKind == CUPTI_ACTIVITY_MEMCPY_KIND_PTOP, m->deviceId, m->contextId, m->streamId,
                          m->correlationId, m->runtimeCorrelationId, m->bytes, m->start + o, m->end + o});
      note_queue(m->contextId, m->streamId);
      note_device(m->deviceId);
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY2: {  // peer to peer
      auto* m = reinterpret_cast<const CUpti_ActivityMemcpyPtoP4*>(r);
      s.copies.push_back({"d2d", "device", !(m->flags & CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC), true, m->deviceId,
                          m->contextId, m->streamId, m->correlationId, 0, m->bytes, m->start + o, m->end + o});
      note_queue(m->contextId, m->streamId);
      note_device(m->srcDeviceId);
      note_device(m->dstDeviceId);
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(r);
      s.memsets.push_back({m->deviceId, m->contextId, m->streamId, m->correlationId, m->bytes, m->start + o, m->end + o});
      note_queue(m->contextId, m->streamId);
      note_device(m->deviceId);
      break;
    }
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
      auto* y = reinterpret_cast<const CUpti_ActivitySynchronization2*>(r);
      const char* kind = nullptr;
      switch (y->type) {
        case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE: kind = "event_sync"; break;
        case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE: kind = "stream_sync"; break;
        case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE: kind = "device_sync"; break;
        default: break;  // cudaStreamWaitEvent orders the device; the host does not wait
      }
      if (kind)
        s.syncs.push_back({kind, y->contextId, y->streamId, y->correlationId, y->start + o, y->end + o,
                           y->type == CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE});
      break;
    }
    case CUPTI_ACTIVITY_KIND_CONTEXT: {
      auto* c = reinterpret_cast<const CUpti_ActivityContext3*>(r);
      s.null_stream[c->contextId] = c->nullStreamId;
      s.ctx_device[c->contextId] = c->deviceId;
      note_device(c->deviceId);
      for (const auto& q : std::map<std::pair<uint32_t, uint32_t>, std::string>(s.queues))
        if (q.first.first == c->contextId) note_queue(q.first.first, q.first.second);
      break;
    }
    default:
      break;
  }
}

void CUPTIAPI on_buffer_completed(CUcontext ctx, uint32_t stream, uint8_t* buffer, size_t, size_t valid) {
  State& s = st();
  {
    std::lock_guard<std::mutex> lock(s.mu);
    tr::for_each_record(buffer, valid, [&](const CUpti_Activity* r) {
      if (s.done) return false;
      take(r);
      return true;
    });
    size_t dropped = 0;
    if (cuptiActivityGetNumDroppedRecords(ctx, stream, &dropped) == CUPTI_SUCCESS) s.dropped += dropped;
  }
  free(buffer);
}

uint64_t CUPTIAPI monotonic_timestamp() { return tr::now_ns(); }

// The call behind a record's correlation ids; null if the tracer saw no call.
const Call* call_of(uint32_t corr, uint32_t other = 0) {
  State& s = st();
  auto it = s.by_corr.find(corr);
  if (it == s.by_corr.end() && other) it = s.by_corr.find(other);
  return it == s.by_corr.end() ? nullptr : &s.calls[it->second];
}

// The thread and call path of a record (none when the tracer saw no call).
void who(tr::JsonLine& j, int tid, const uint32_t* path) {
  j.num("tid", tid);
  if (path) j.unum("path_id", st().out.path_id(st().paths.at(*path)));
}
void who(tr::JsonLine& j, const Call* c) { who(j, c ? c->tid : 0, c ? &c->path : nullptr); }

// Writes the records of `v` whose call has returned (all of them when `final`) with `write`, and
// keeps the others for the next time. Caller holds the lock.
template <class T, class Corr, class Write>
void drain(std::vector<T>& v, bool final, Corr corr, Write write) {
  size_t kept = 0;
  for (T& r : v) {
    const Call* c = corr(r);
    if (!final && c && c->open)
      v[kept++] = std::move(r);
    else
      write(r, c);
  }
  v.erase(v.begin() + kept, v.end());
}

// Writes every record that is ready (FORMAT.md). Caller holds the lock.
void write_ready(bool final) {
  State& s = st();
  tr::TraceFile& out = s.out;
  uint64_t& id = s.next_id;
  auto none = [](const auto&) -> const Call* { return nullptr; };
  drain(s.new_allocs, final, none, [&](const Alloc& a, const Call*) {
    tr::JsonLine j("buffer");
    j.str("id", hexptr(a.base)).unum("bytes", a.bytes).str("memory", a.memory);
    if (a.pool) j.str("pool", hexptr(a.pool));
    who(j, a.tid, a.has_path ? &a.path : nullptr);
    out.put(j);
  });
  drain(s.kernels, final, [](const Kernel& k) { return call_of(k.corr); }, [&](const Kernel& k, const Call* c) {
    tr::JsonLine j("kernel");
    j.unum("id", ++id).str("name", k.name).str("queue", queue_id(k.context, k.stream))
        .nums("global", {k.grid[0] * k.block[0], k.grid[1] * k.block[1], k.grid[2] * k.block[2]})
        .nums("local", {k.block[0], k.block[1], k.block[2]}).nums("grid", {k.grid[0], k.grid[1], k.grid[2]})
        .unum("queued_ns", k.queued ? k.queued : (c ? c->entry_ns : k.start))
        .unum("submit_ns", k.submitted ? k.submitted : (c ? c->entry_ns : k.start))
        .unum("start_ns", k.start).unum("end_ns", k.end);
    if (c && c->buffers_known) {
      std::string b = "[";
      for (uint64_t a : c->buffers) b += std::string(b.size() > 1 ? "," : "") + "{\"id\":\"" + hexptr(a) + "\",\"access\":\"?\"}";
      j.raw("buffers", b + "]");
    } else {
      j.null("buffers");  // arguments not seen (a runtime launch with no driver launch inside)
    }
    who(j, c);
    out.put(j);
    ++s.counts[0];
  });
  drain(s.copies, final, [](const Copy& m) { return call_of(m.corr, m.runtime_corr); }, [&](const Copy& m, const Call* c) {
    tr::JsonLine j("copy");
    j.unum("id", ++id).str("kind", m.kind).unum("bytes", m.bytes).str("host_memory", m.host_memory)
        .str("buffer", c && c->buffer ? hexptr(c->buffer) : std::string("?"));
    if (c && c->has_hash)
      j.str("hash", tr::hex64(c->hash));
    else
      j.null("hash");
    j.str("queue", queue_id(m.context, m.stream)).unum("queued_ns", c ? c->entry_ns : m.start)
        .unum("start_ns", m.start).unum("end_ns", m.end).boolean("blocking", m.blocking).boolean("peer", m.peer);
    who(j, c);
    out.put(j);
    ++s.counts[1];
  });
  drain(s.memsets, final, [](const Memset& m) { return call_of(m.corr); }, [&](const Memset& m, const Call* c) {
    tr::JsonLine j("memset");
    j.unum("id", ++id).unum("bytes", m.bytes).str("queue", queue_id(m.context, m.stream))
        .unum("start_ns", m.start).unum("end_ns", m.end);
    who(j, c);
    out.put(j);
  });
  drain(s.builds, final, none, [&](const Build& b, const Call*) {
    tr::JsonLine j("build");
    j.str("kind", "build").str("program", b.program).str("source_hash", tr::hex64(b.hash)).str("options", "")
        .str("context", b.context).num("status", b.status).unum("start_ns", b.start).unum("end_ns", b.end);
    who(j, b.tid, &b.path);
    out.put(j);
  });
  drain(s.syncs, final, [](const Sync& y) { return call_of(y.corr); }, [&](const Sync& y, const Call* c) {
    tr::JsonLine j("sync");
    j.str("kind", y.kind).unum("start_ns", y.start).unum("end_ns", y.end);
    if (y.has_stream)
      j.str("queue", queue_id(y.context, y.stream));
    else
      j.null("queue");
    who(j, c);
    out.put(j);
    ++s.counts[2];
  });
  drain(s.host_syncs, final, none, [&](const HostSync& y, const Call*) {
    tr::JsonLine j("sync");
    j.str("kind", y.kind).unum("start_ns", y.start).unum("end_ns", y.end).null("queue");
    who(j, y.tid, &y.path);
    out.put(j);
    ++s.counts[2];
  });
}

// The rest of the records, the samples and the end record (naming `sig`, a fatal signal, if
// any); closes the file. Caller holds the lock.
void finish(int sig) {
  State& s = st();
  if (s.done) return;
  write_ready(true);
  s.done = true;
  tr::Sampler& sm = tr::sampler();
  s.out.samples(true);
  tr::JsonLine end("end");
  end.unum("end_ns", tr::now_ns());
  if (sig) end.num("signal", sig);
  end.unum("samples_dropped", sm.dropped()).unum("records_dropped", s.dropped).str("sampler", sm.interval_ns() ? sm.method() : "off");
  s.out.put(end);
  std::string file = s.out.name();
  if (!s.out.close()) return;
  fprintf(stderr, "archbench trace (cuda): %s%zu kernels, %zu copies, %zu syncs, %zu samples -> %s\n",
          sig ? "the program dies of a signal; kept " : "", s.counts[0], s.counts[1], s.counts[2], sm.count(), file.c_str());
}

}  // namespace archbench::trace_cuda
