// Which counters PM sampling takes in its one pass, and what level 1 they allow
// (tools/analysis/pmsampling/inject.cpp says how and why); the choice cached per chip.
#include <sys/stat.h>

#include <cctype>
#include <cstdlib>
#include <fstream>
#include <stdexcept>

#include "tools/analysis/pmsampling/pmsampling.hpp"

namespace archbench::pmsampling {

// ---- The counters: which part of the level-1 formulas each collected metric feeds ----------

const char* role_name(Role r) {
  switch (r) {
    case Role::cycles: return "cycles";
    case Role::executed: return "executed";
    case Role::issued: return "issued";
    case Role::thread: return "thread";
    case Role::warps: return "warps";
    case Role::stall: return "stall";
    default: return "other";
  }
}

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : text + sep) {
    if (c == sep || c == '\n') {
      while (!cur.empty() && std::isspace(static_cast<unsigned char>(cur.back()))) cur.pop_back();
      const std::size_t b = cur.find_first_not_of(" \t");
      if (b != std::string::npos) out.push_back(cur.substr(b));
      cur.clear();
    } else {
      cur += c;
    }
  }
  return out;
}

// A metric's parts: "TPC.TriageCompute.sm__inst_executed_realtime.sum" is the counter
// sm__inst_executed_realtime of the unit TPC in the single-pass collection TriageCompute;
// "sm__inst_issued.sum" a plain counter (no collection).
struct Parts {
  std::string collection, counter;
};
Parts parts_of(const std::string& metric) {
  std::vector<std::string> p;
  std::string cur;
  for (char c : metric + '.') {
    if (c == '.') {
      p.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  for (std::size_t i = 0; i < p.size(); ++i)
    if (p[i].find("__") != std::string::npos) return {i >= 1 ? p[i - 1] : "", p[i]};
  return {"", p.empty() ? metric : p[0]};
}

// The counter without its collection, rollup and `_realtime` suffix (the real-time variant).
std::string base_of(const std::string& metric) {
  std::string b = parts_of(metric).counter;
  const std::string rt = "_realtime";
  if (b.size() > rt.size() && b.compare(b.size() - rt.size(), rt.size(), rt) == 0) b.resize(b.size() - rt.size());
  return b;
}

bool is_pred_on(const std::string& metric) {
  const std::string b = base_of(metric), p = "_pred_on";
  return b.size() > p.size() && b.compare(b.size() - p.size(), p.size(), p) == 0;
}

Role role_of(const std::string& metric, std::string* reason) {
  const std::string b = base_of(metric);
  if (b == "sm__cycles_active") return Role::cycles;
  if (b == "sm__inst_executed" || b == "smsp__inst_executed") return Role::executed;
  if (b == "sm__inst_issued" || b == "smsp__inst_issued") return Role::issued;
  if (b == "smsp__thread_inst_executed" || b == "sm__thread_inst_executed" || b == "smsp__thread_inst_executed_pred_on" ||
      b == "sm__thread_inst_executed_pred_on")
    return Role::thread;
  if (b == "smsp__warps_active" || b == "sm__warps_active" || b == "tpc__warps_active") return Role::warps;
  if (b.rfind(ab::kStallPrefix, 0) == 0 && b.find("not_issued") == std::string::npos) {
    *reason = b.substr(std::string(ab::kStallPrefix).size());
    return Role::stall;
  }
  return Role::other;
}

const char* class_name(ab::StallClass c) {
  switch (c) {
    case ab::StallClass::fetch: return "fetch";
    case ab::StallClass::decode: return "decode";
    case ab::StallClass::memory: return "memory";
    case ab::StallClass::core: return "core";
    case ab::StallClass::not_a_stall: return "not_a_stall";
    default: return "unclassified";
  }
}

// The stall reasons by how much of a typical kernel's stalls they hold: where not all fit in one
// pass, the first ones are kept.
const std::vector<std::string>& stall_priority() {
  static const std::vector<std::string> k = {
      "long_scoreboard", "barrier", "no_instruction", "wait", "math_pipe_throttle", "short_scoreboard",
      "mio_throttle", "lg_throttle", "branch_resolving", "membar", "dispatch_stall", "drain", "imc_miss",
      "tex_throttle", "sleeping", "misc", "gmma"};
  return k;
}

// The classified stall reasons the chip counts (plain counters): what "every reason" means.
std::set<std::string> chip_reasons(const std::vector<std::string>& base) {
  std::set<std::string> out;
  for (const std::string& b : base) {
    std::string reason;
    if (!parts_of(b).collection.empty() || role_of(b, &reason) != Role::stall) continue;
    const ab::StallClass c = ab::stall_class(reason);
    if (c != ab::StallClass::not_a_stall && c != ab::StallClass::unclassified) out.insert(reason);
  }
  return out;
}

// What one collection of the chip's PM-sampling counters ("" for the plain ones) offers for level
// 1, in the order it is tried: the IPC pair (required), then groups of alternatives for one
// quantity each: warp efficiency, issued instructions, active warps, each stall reason.
struct Wanted {
  std::string collection;
  std::vector<std::string> required;
  std::vector<std::vector<std::string>> optional;
};
Wanted wanted_metrics(const std::vector<std::string>& base, const std::string& collection) {
  std::map<std::string, std::string> have;  // counter -> the base metric's full name
  for (const std::string& b : base) {
    const Parts p = parts_of(b);
    if (p.collection == collection) have.emplace(p.counter, b);
  }
  auto all = [&](std::initializer_list<const char*> names) {
    std::vector<std::string> out;
    for (const char* n : names)
      if (have.count(n)) out.push_back(have[n] + ".sum");
    return out;
  };
  Wanted w;
  w.collection = collection;
  const std::vector<std::string> cycles = all({"sm__cycles_active", "sm__cycles_active_realtime"});
  const std::vector<std::string> executed = all({"sm__inst_executed", "sm__inst_executed_realtime",
                                                 "smsp__inst_executed", "smsp__inst_executed_realtime"});
  if (cycles.empty() || executed.empty()) return w;  // no IPC from this collection
  w.required = {cycles[0], executed[0]};
  for (const std::vector<std::string>& g :
       {all({"smsp__thread_inst_executed", "smsp__thread_inst_executed_realtime", "sm__thread_inst_executed",
             "sm__thread_inst_executed_realtime", "smsp__thread_inst_executed_pred_on",
             "smsp__thread_inst_executed_pred_on_realtime", "sm__thread_inst_executed_pred_on",
             "sm__thread_inst_executed_pred_on_realtime"}),
        all({"sm__inst_issued", "sm__inst_issued_realtime", "smsp__inst_issued", "smsp__inst_issued_realtime"}),
        all({"smsp__warps_active", "smsp__warps_active_realtime", "sm__warps_active", "sm__warps_active_realtime",
             "tpc__warps_active", "tpc__warps_active_realtime"})})
    if (!g.empty()) w.optional.push_back(g);
  std::map<std::string, std::vector<std::string>> stalls;  // reason -> its counters (plain before _realtime)
  for (const auto& [counter, full] : have) {
    std::string reason;
    if (role_of(full, &reason) != Role::stall || ab::stall_class(reason) == ab::StallClass::not_a_stall) continue;
    auto& g = stalls[reason];
    if (counter.find("_realtime") == std::string::npos) g.insert(g.begin(), full + ".sum");
    else g.push_back(full + ".sum");
  }
  for (const std::string& r : stall_priority())
    if (stalls.count(r)) w.optional.push_back(stalls[r]), stalls.erase(r);
  for (const auto& [r, g] : stalls) w.optional.push_back(g);  // reasons a newer chip adds
  return w;
}

// The roles a group of alternatives serves (one metric of each group is enough).
std::string group_key(const std::vector<std::string>& g) {
  std::string reason;
  const Role r = role_of(g.front(), &reason);
  return r == Role::stall ? "stall_" + reason : role_name(r);
}

// ---- Choosing the one-pass set -------------------------------------------------------------

std::string cache_path(const Settings& cfg, const std::string& chip) {
  if (cfg.cache == "0" || cfg.cache == "off") return "";
  if (!cfg.cache.empty()) return cfg.cache;
  std::string dir;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) dir = x;
  else if (const char* h = std::getenv("HOME"); h && *h) dir = std::string(h) + "/.cache";
  else return "";
  return dir + "/archbench/pmsampling-v2-" + chip + ".metrics";  // v2: collections, this library's wanted list
}



std::string hex_of(const std::vector<std::uint8_t>& v) {
  static const char* d = "0123456789abcdef";
  std::string s;
  s.reserve(2 * v.size());
  for (std::uint8_t b : v) s += d[b >> 4], s += d[b & 15];
  return s;
}
std::vector<std::uint8_t> bytes_of(const std::string& hex) {
  auto nib = [](char c) { return c >= 'a' ? c - 'a' + 10 : c >= 'A' ? c - 'A' + 10 : c - '0'; };
  std::vector<std::uint8_t> v;
  if (hex.size() % 2 || hex.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos) return v;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2) v.push_back(std::uint8_t(nib(hex[i]) << 4 | nib(hex[i + 1])));
  return v;
}
std::unique_ptr<Cached> read_cache(const std::string& path, const std::string& chip) {
  if (path.empty()) return nullptr;
  std::uint32_t version = 0;
  cuptiGetVersion(&version);
  std::ifstream f(path);
  std::string line;
  if (!std::getline(f, line) || line != kCacheHeader) return nullptr;
  auto c = std::make_unique<Cached>();
  bool chip_ok = false, version_ok = false;
  while (std::getline(f, line)) {
    const std::size_t sp = line.find(' ');
    const std::string key = line.substr(0, sp), value = sp == std::string::npos ? "" : line.substr(sp + 1);
    if (key == "chip") chip_ok = value == chip;
    else if (key == "cupti") version_ok = value == std::to_string(version);
    else if (key == "metric") c->metrics.push_back(value);
    else if (key == "reason") c->reasons.insert(value);
    else if (key == "note") c->notes.push_back(value);
    else if (key == "config") c->config = bytes_of(value);
    else if (key == "availability") c->availability = bytes_of(value);
    else if (key == "host_init_ns") c->host_init_ns = std::strtoull(value.c_str(), nullptr, 10);
    else if (key == "rejected") {
      const std::size_t tab = value.find('\t');
      c->rejected[value.substr(0, tab)] = tab == std::string::npos ? "" : value.substr(tab + 1);
    }
  }
  return chip_ok && version_ok && !c->metrics.empty() ? std::move(c) : nullptr;
}

// A fresh host object configured with `metrics`: it, when they take one pass; else null and why.
std::unique_ptr<Host> trial(const std::string& chip, std::vector<std::uint8_t>& availability,
                            const std::vector<std::string>& metrics, std::string* why, std::size_t* trials) {
  ++*trials;
  try {
    auto h = std::make_unique<Host>(chip, availability);
    const std::size_t passes = h->configure(metrics);
    if (passes == 1) return h;
    *why = "needs " + std::to_string(passes) + " passes with the others";
  } catch (const std::exception& e) {
    *why = e.what();
  }
  return nullptr;
}

// How much of level 1 a set gives: warp efficiency (exact 4, from predicated-on instructions 3),
// the stall split (every reason 4; some reasons with the active warps 2, 1 more with a frontend
// reason), issued instructions (the replay part, near 0 on Hopper) 1.
int score_of(const std::vector<std::string>& metrics, const std::set<std::string>& reasons_on_chip) {
  bool thread = false, pred_on = false, issued = false, warps = false, front = false;
  std::set<std::string> reasons;
  for (const std::string& m : metrics) {
    std::string reason;
    switch (role_of(m, &reason)) {
      case Role::thread: thread = true, pred_on = is_pred_on(m); break;
      case Role::issued: issued = true; break;
      case Role::warps: warps = true; break;
      case Role::stall:
        if (reasons_on_chip.count(reason)) reasons.insert(reason), front |= frontend_class(ab::stall_class(reason));
        break;
      default: break;
    }
  }
  int score = (thread ? (pred_on ? 3 : 4) : 0) + (issued ? 1 : 0);
  if (!reasons.empty() && reasons == reasons_on_chip) score += 4;
  else if (!reasons.empty() && warps) score += 2 + (front ? 1 : 0);
  return score;
}

// The one-pass set: the user's, the cached one (`cached`, where it still takes one pass) or the
// search's over the chip's counters (`base`: listed only where there is no usable cache).
Choice choose(const Settings& cfg, const std::string& chip, std::vector<std::uint8_t>& availability,
              const std::vector<std::string>& base, const Cached* cached, Times& t) {
  Choice c;
  std::string why;
  c.chip_reasons = chip_reasons(base);
  if (!cfg.metrics.empty()) {  // the user's set, as given
    c.how = "ARCHBENCH_PM_METRICS";
    c.host = trial(chip, availability, split(cfg.metrics, ','), &why, &c.trials);
    if (!c.host) throw std::runtime_error("ARCHBENCH_PM_METRICS: " + why);
    c.metrics = c.host->metrics();
    c.config = c.host->image();
    return c;
  }
  if (cached && !cached->config.empty()) {  // the set and its config image: no host object needed to start
    c.how = "cache " + cache_path(cfg, chip) + " (config image too)";
    c.metrics = cached->metrics;
    c.config = cached->config;
    c.host_init_ns = cached->host_init_ns;
    c.rejected = cached->rejected;
    c.chip_reasons = cached->reasons;
    c.notes = cached->notes;
    t.lap("choose_ns");
    return c;
  }
  if (cached && (c.host = trial(chip, availability, cached->metrics, &why, &c.trials))) {
    c.how = "cache " + cache_path(cfg, chip);
    c.rejected = cached->rejected;
    c.chip_reasons = cached->reasons;
    c.notes = cached->notes;
    c.metrics = c.host->metrics();
    c.config = c.host->image();
    t.lap("choose_ns");
    return c;
  }
  if (base.empty()) throw std::runtime_error("the cached set does not take one pass any more: " + why);
  // Each collection's set: all it offers if they take one pass, else the IPC pair and, greedily,
  // the first alternative of each group that keeps one pass. A collection's set then grows the
  // same way with the plain counters for what it lacks.
  std::set<std::string> collections;
  for (const std::string& b : base) collections.insert(parts_of(b).collection);
  const Wanted plain = wanted_metrics(base, "");
  std::string search = "[";
  int best = -1;
  for (const std::string& col : collections) {
    const Wanted w = col.empty() ? plain : wanted_metrics(base, col);
    if (w.required.empty()) continue;
    std::map<std::string, std::string> rejected;
    std::vector<std::string> chosen = w.required;
    for (const auto& g : w.optional) chosen.push_back(g.front());
    std::unique_ptr<Host> host = trial(chip, availability, chosen, &why, &c.trials);
    std::set<std::string> covered;
    if (host) {
      for (const auto& g : w.optional) covered.insert(group_key(g));
    } else {
      chosen = w.required;
      host = trial(chip, availability, chosen, &why, &c.trials);
      if (!host) {
        search += std::string(search.size() > 1 ? "," : "") + "{\"collection\":" + tr::JsonLine::quote(col) +
                  ",\"error\":" + tr::JsonLine::quote("the IPC pair alone does not fit: " + why) + "}";
        continue;
      }
    }
    auto grow = [&](const std::vector<std::vector<std::string>>& groups) {
      for (const auto& g : groups) {
        if (covered.count(group_key(g))) continue;
        bool kept = false;
        for (const std::string& m : g) {
          chosen.push_back(m);
          if (auto h = trial(chip, availability, chosen, &why, &c.trials)) {
            host = std::move(h);
            kept = true;
            break;
          }
          chosen.pop_back();
          rejected[m] = why;
        }
        if (kept) {
          covered.insert(group_key(g));
          for (const std::string& m : g) rejected.erase(m);
        }
      }
    };
    if (covered.empty()) grow(w.optional);
    if (!col.empty()) grow(plain.optional);
    // Active warps serve only to share out a partial set of stall reasons.
    const bool stalls = std::any_of(chosen.begin(), chosen.end(), [](const std::string& m) {
      std::string r;
      return role_of(m, &r) == Role::stall;
    });
    auto warps = std::find_if(chosen.begin(), chosen.end(), [](const std::string& m) {
      std::string r;
      return role_of(m, &r) == Role::warps;
    });
    if (!stalls && warps != chosen.end()) {
      chosen.erase(warps);
      if (auto h = trial(chip, availability, chosen, &why, &c.trials)) host = std::move(h);
    }
    const int score = score_of(host->metrics(), c.chip_reasons);
    search += std::string(search.size() > 1 ? "," : "") + "{\"collection\":" + tr::JsonLine::quote(col) +
              ",\"metrics\":" + json_strings(host->metrics()) + ",\"score\":" + std::to_string(score) + "}";
    if (score > best) {
      best = score;
      c.host = std::move(host);
      c.rejected = rejected;
      c.how = "search (" + (col.empty() ? std::string("plain counters") : "collection " + col) + ")";
    }
  }
  c.search = search + "]";
  if (!c.host) throw std::runtime_error("no PM-sampling counter set of this GPU gives the IPC in one pass");
  // What the search tried and did not take, by the role it would have served.
  for (const auto& g : plain.optional)
    if (std::none_of(c.host->metrics().begin(), c.host->metrics().end(),
                     [&](const std::string& m) { return group_key({m}) == group_key(g); }) &&
        !c.rejected.count(g.front()))
      c.rejected[g.front()] = "not in the chosen collection's one-pass set";
  // Where no stall reason made it, whether one can at all: a reason alone.
  const bool stalls = std::any_of(c.host->metrics().begin(), c.host->metrics().end(), [](const std::string& m) {
    std::string r;
    return role_of(m, &r) == Role::stall;
  });
  for (const auto& g : plain.optional) {
    std::string reason;
    if (stalls || role_of(g.front(), &reason) != Role::stall) continue;
    if (trial(chip, availability, {g.front()}, &why, &c.trials))
      c.notes.push_back("a stall reason alone takes one pass (" + g.front() + ") but none fits beside the IPC counters");
    else
      c.notes.push_back("no stall reason can be sampled in one pass on " + chip + ": " + g.front() + " alone " +
                        why.substr(0, why.find(" with the others")) +
                        " (the Profiler Host API's pass count), so frontend and backend cannot be told apart here");
    break;
  }
  t.lap("choose_ns");
  c.metrics = c.host->metrics();
  c.config = c.host->image();
  for (const auto& [k, v] : t.parts)
    if (k == "host_init_ns") c.host_init_ns = v;
  const std::string cache = cache_path(cfg, chip);
  if (!cache.empty()) {  // remembered for the next run on this chip (best effort)
    std::uint32_t version = 0;
    cuptiGetVersion(&version);
    const std::string dir = cache.substr(0, cache.rfind('/'));
    mkdir(dir.substr(0, dir.rfind('/')).c_str(), 0755);
    mkdir(dir.c_str(), 0755);
    const std::string tmp = cache + "." + std::to_string(getpid());
    if (FILE* f = std::fopen(tmp.c_str(), "w")) {
      std::fprintf(f, "%s\nchip %s\ncupti %u\n", kCacheHeader, chip.c_str(), version);
      for (const std::string& m : c.host->metrics()) std::fprintf(f, "metric %s\n", m.c_str());
      for (const std::string& r : c.chip_reasons) std::fprintf(f, "reason %s\n", r.c_str());
      for (const std::string& n : c.notes) std::fprintf(f, "note %s\n", n.c_str());
      std::fprintf(f, "host_init_ns %llu\nconfig %s\navailability %s\n", static_cast<unsigned long long>(c.host_init_ns),
                   hex_of(c.config).c_str(), hex_of(availability).c_str());
      for (const auto& [m, w] : c.rejected) std::fprintf(f, "rejected %s\t%s\n", m.c_str(), w.c_str());
      if (std::fclose(f) == 0) std::rename(tmp.c_str(), cache.c_str());
      else std::remove(tmp.c_str());
    }
  }
  return c;
}


Plan plan_of(const std::vector<std::string>& metrics, const std::set<std::string>& chip_reasons) {
  Plan p;
  bool cycles = false, executed = false, pred_on = false;
  std::set<std::string> counted;
  std::vector<std::string> front, back;
  for (const std::string& m : metrics) {
    std::string reason;
    const Role r = role_of(m, &reason);
    p.roles.push_back(r);
    p.reasons.push_back(reason);
    p.roles_json[m] = r == Role::stall ? "stall_" + reason : role_name(r);
    cycles |= r == Role::cycles;
    executed |= r == Role::executed;
    if (r == Role::thread) p.has_thread = true, pred_on = is_pred_on(m);
    p.has_issued |= r == Role::issued;
    p.has_warps |= r == Role::warps;
    if (r == Role::stall) {
      const ab::StallClass c = ab::stall_class(reason);
      p.classes[reason] = class_name(c);
      if (frontend_class(c)) front.push_back(reason), counted.insert(reason);
      if (backend_class(c)) back.push_back(reason), counted.insert(reason);
    }
  }
  if (!cycles || !executed)
    throw std::runtime_error("the sampled set has no " + std::string(cycles ? "sm__inst_executed" : "sm__cycles_active") +
                             ": no IPC, no TopDown");
  p.has_front = !front.empty();
  p.has_back = !back.empty();
  const bool every = !counted.empty() && std::includes(counted.begin(), counted.end(), chip_reasons.begin(),
                                                        chip_reasons.end());
  p.split = every ? Split::full : (!counted.empty() && p.has_warps ? Split::partial : Split::none);
  p.quantities = {"retire"};
  if (p.has_thread || p.has_issued) p.quantities.push_back("divergence");
  auto join = [](const std::vector<std::string>& v) {
    std::string s;
    for (const std::string& x : v) s += (s.empty() ? "" : ", ") + x;
    return s;
  };
  if (p.split == Split::full) {
    p.quantities.insert(p.quantities.end(), {"frontend", "backend"});
    p.notes.push_back("frontend and backend share the stalls as every stall reason of the chip does (" +
                      std::to_string(counted.size()) + " reasons)");
  } else if (p.split == Split::partial) {
    if (p.has_front) p.quantities.push_back("frontend");
    if (p.has_back) p.quantities.push_back("backend");
    p.quantities.push_back("stall_other");
    std::vector<std::string> in_pass = front;
    in_pass.insert(in_pass.end(), back.begin(), back.end());
    const std::string who = p.has_front && p.has_back ? "frontend and backend hold"
                            : p.has_back               ? "backend holds"
                                                       : "frontend holds";
    p.approximations.push_back(
        who + " only the stall reasons in the pass (" + join(in_pass) + ": " + std::to_string(counted.size()) +
        " of the chip's " + std::to_string(chip_reasons.size()) + "), each as its share of the warps' active cycles " +
        "without an issue (active warp-cycles minus instructions issued, eligible warps not selected included): a " +
        "lower bound; stall_other is the rest of the stalls (" + (p.has_front ? "" : "all of frontend, ") +
        "the reasons not in the pass)");
  } else {
    p.quantities.push_back("stall");
    p.notes.push_back(counted.empty()
                          ? "no stall reason is in the pass: frontend and backend are shown together as stall "
                            "(archbench_topdown.py --timeline --stall-split TOPDOWN.json shares it out as a "
                            "kernel-replay TopDown did, kernel by kernel)"
                          : "some stall reasons fit in the pass but not the active warps: too little to share out "
                            "the stalls, so frontend and backend are shown together as stall");
  }
  if (!p.has_thread && !p.has_issued)
    p.notes.push_back("no divergence: neither thread instructions nor sm__inst_issued fit in the pass, so retire "
                      "includes what divergence would have taken");
  else if (!p.has_thread)
    p.approximations.push_back("divergence is its replay part only (no thread-instruction counter in the pass)");
  else if (!p.has_issued)
    p.approximations.push_back("divergence is its branch part only: no sm__inst_issued in the pass, so no replay part "
                               "(near 0 on Volta and later: the kernel-replay TopDown shows it)");
  if (pred_on)
    p.approximations.push_back("warp efficiency from predicated-on thread instructions (no smsp__thread_inst_executed "
                               "in the pass): lanes a predicate turned off count as idle, so divergence may read "
                               "higher than the kernel-replay TopDown's");
  return p;
}

}  // namespace archbench::pmsampling
