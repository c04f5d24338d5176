#include "elastic_driver.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <iostream>
#include <optional>
#include <regex>
#include <thread>

#include "discovery.h"
#include "horovodcpp/elastic.h"
#include "host_pool.h"
#include "launcher_name.h"
#include "program_path.h"
#include "shell_words.h"
#include "supervisor.h"

namespace hvd::launcher {
namespace {

using Clock = std::chrono::steady_clock;

void say(const std::string& message) { std::cerr << launcher_name() << ": elastic: " << message << std::endl; }

// The same for every relaunch of this hvdrun, different for every hvdrun.
std::string new_job_name() {
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  return "hvdrun-" + std::string(host) + "-" + std::to_string(getpid()) + "-" +
         std::to_string(std::time(nullptr));
}

bool inside_slurm(const Environment& env) {
  const char* job = find_env(env, "SLURM_JOB_ID");
  return job != nullptr && *job != '\0';
}

std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& i : items) out += (out.empty() ? "" : ",") + i;
  return out;
}

bool same_hosts(const std::vector<HostSlots>& a, const std::vector<HostSlots>& b) {
  if (a.size() != b.size()) return false;
  for (const auto& h : a) {
    bool found = false;
    for (const auto& g : b) found = found || (g.host == h.host && g.slots == h.slots);
    if (!found) return false;
  }
  return true;
}

// Finds the program's "resumed from commit" line in the ranks' output (rank 0 prints it), and
// keeps mpirun's own lines for lost_daemon_hosts().
class ResumeWatcher {
 public:
  explicit ResumeWatcher(int launch) : launch_(launch) {}
  const std::string& launcher_text() const { return launcher_text_; }
  // Rank 0 reported its restore: every rank is past it, so their notice handlers are in place.
  bool restored() const { return restored_; }
  void feed(const char* data, std::size_t size) {
    partial_.append(data, size);
    for (std::size_t nl; (nl = partial_.find('\n')) != std::string::npos; partial_.erase(0, nl + 1))
      take(partial_.substr(0, nl));
    if (partial_.size() > 65536) partial_.clear();
  }

 private:
  void take(const std::string& line) {
    static const std::regex kResumed(R"(horovodcpp elastic: resumed from commit (\d+) \(taken at size (\d+))");
    static const std::regex kFresh(R"(horovodcpp elastic: no commit in (\S+))");
    if (line.rfind("[", 0) != 0 && launcher_text_.size() < 65536) launcher_text_ += line + "\n";
    std::smatch m;
    if (std::regex_search(line, m, kResumed) || std::regex_search(line, m, kFresh)) restored_ = true;
    if (std::regex_search(line, m, kResumed))
      say("launch " + std::to_string(launch_) + " resumed from commit " + m[1].str() +
          " (taken at size " + m[2].str() + ")");
    else if (std::regex_search(line, m, kFresh))
      say("launch " + std::to_string(launch_) + " found no commit: it starts from the beginning");
  }
  int launch_;
  bool restored_ = false;
  std::string partial_;
  std::string launcher_text_;
};

class Driver {
 public:
  Driver(const LaunchOptions& o, const LaunchContext& context)
      : o_(o),
        context_(context),
        pool_(o.cooldown_min > 0 ? std::optional<HostPool::Cooldown>({o.cooldown_min, o.cooldown_max})
                                 : std::nullopt),
        job_(new_job_name()),
        min_np_(o.min_np > 0 ? o.min_np : o.np),
        max_np_(o.max_np > 0 ? o.max_np : 1 << 30) {}

  int run();

 private:
  // Runs discovery. A failure ends hvdrun before the first launch; later it is reported once and
  // the previous hosts are kept (a flaky script should not stop a running job).
  void refresh(bool strict) {
    try {
      pool_.set_discovered(discover_hosts(o_.host_discovery_script, o_.slots_per_host, context_.env));
      last_error_.clear();
    } catch (const Error& e) {
      if (strict) throw;
      if (e.what() != last_error_) say(std::string("warning: ") + e.what() + "; keeping the hosts it printed before");
      last_error_ = e.what();
    }
  }
  int wanted_np(Clock::time_point now) const {
    return std::min(total_slots(pool_.usable(now)), max_np_);
  }
  std::optional<std::vector<HostSlots>> wait_for_slots();
  int on_tick(const std::vector<HostSlots>& running, bool ready, bool* notified);
  bool hosts_gone(const std::vector<HostSlots>& running, std::string* reason);
  bool leave_out_lost_hosts(const std::vector<HostSlots>& running, const std::string& text,
                            std::string* reason);

  const LaunchOptions& o_;
  LaunchContext context_;
  HostPool pool_;
  std::string job_;
  int min_np_;
  int max_np_;
  std::string last_error_;
};

std::optional<std::vector<HostSlots>> Driver::wait_for_slots() {
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::seconds(o_.elastic_timeout);
  for (bool said = false;; said = true) {
    const auto now = Clock::now();
    const int slots = wanted_np(now);
    if (slots >= min_np_) return pool_.assign(slots, now);
    const std::string have = std::to_string(total_slots(pool_.usable(now))) + " usable slot(s) (" +
                             (pool_.usable(now).empty() ? std::string("no host")
                                                        : host_list_string(pool_.usable(now))) +
                             (pool_.blacklist_summary(now).empty()
                                  ? std::string()
                                  : "; left out after failures: " + pool_.blacklist_summary(now)) +
                             ")";
    if (now >= deadline) {
      say("error: only " + have + " for longer than --elastic-timeout " +
          std::to_string(o_.elastic_timeout) + " s, fewer than --min-np " + std::to_string(min_np_) +
          "; giving up. The newest commit stays on each host in HOROVOD_ELASTIC_DIR (default "
          "$TMPDIR/horovodcpp-elastic-<uid>/" + job_ + "); set HOROVOD_ELASTIC_DIR to it to resume");
      return std::nullopt;
    }
    if (!said)
      say("waiting up to " + std::to_string(o_.elastic_timeout) + " s for --min-np " +
          std::to_string(min_np_) + " slots: " + have);
    std::this_thread::sleep_for(std::chrono::seconds(1));
    refresh(false);
  }
}

// While a job runs: rediscover, and when the usable hosts differ from the running ones (and still
// hold --min-np slots), ask the job once to stop at its next commit. Not before the job has
// restored (`ready`): a rank still starting would die of the signal, and lose its start-up.
int Driver::on_tick(const std::vector<HostSlots>& running, bool ready, bool* notified) {
  if (*notified) return 0;
  refresh(false);
  if (!ready) return 0;
  const auto now = Clock::now();
  const int np = wanted_np(now);
  const auto wanted = pool_.assign(np, now);
  if (np < min_np_ || same_hosts(wanted, running)) return 0;
  *notified = true;
  say("hosts changed: " + host_list_string(running) + " -> " + host_list_string(wanted) +
      " (np " + std::to_string(total_slots(running)) + " -> " + std::to_string(np) +
      "); asking the job (SIGUSR1) to stop at its next commit");
  return SIGUSR1;
}

// A launch that failed without a named rank because whole hosts were lost: every slot of each
// lost host that was running is left out. False when no running host was lost.
bool Driver::leave_out_lost_hosts(const std::vector<HostSlots>& running, const std::string& text,
                                  std::string* reason) {
  std::string lost;
  for (const auto& host : lost_daemon_hosts(text))
    for (const auto& h : running) {
      if (h.host != host) continue;
      int cooldown = 0;
      for (int i = 0; i < h.slots; ++i) cooldown = pool_.mark_failed(host, h.slots, Clock::now());
      lost += (lost.empty() ? "" : ", ") + host + " (" + std::to_string(h.slots) + " slot(s) left out " +
              (cooldown > 0 ? "for " + std::to_string(cooldown) + " s)" : std::string("for good)"));
    }
  if (lost.empty()) return false;
  *reason = "mpirun lost the daemon of host(s) " + lost;
  return true;
}

// A launch that failed without a named rank while discovery stopped offering some of its hosts
// (Open MPI then often reports only that its daemons failed): those hosts are the cause, and
// discovery already leaves them out. Discovery may lag behind the failure: asked for a few
// seconds before giving up.
bool Driver::hosts_gone(const std::vector<HostSlots>& running, std::string* reason) {
  for (int attempt = 0; attempt < 5; ++attempt) {
    if (attempt > 0) std::this_thread::sleep_for(std::chrono::seconds(1));
    refresh(false);
    std::vector<std::string> gone;
    for (const auto& h : running) {
      bool offered = false;
      for (const auto& d : pool_.discovered()) offered = offered || d.host == h.host;
      if (!offered) gone.push_back(h.host);
    }
    if (!gone.empty()) {
      *reason = "the launch failed and discovery no longer offers host(s) " + joined(gone);
      return true;
    }
  }
  return false;
}

int Driver::run() {
  refresh(true);
  std::string reason = "first launch";
  for (int launch = 1;; ++launch) {
    if (launch > 1 && o_.reset_limit >= 0 && launch - 1 > o_.reset_limit) {
      say("error: not relaunching after " + reason + ": --reset-limit " +
          std::to_string(o_.reset_limit) + " relaunch(es) already done");
      return 1;
    }
    auto hosts = wait_for_slots();
    if (!hosts) return 1;
    const auto now = Clock::now();
    LaunchPlan plan = elastic_launch_plan(o_, context_, *hosts, pool_.blacklisted(now), job_);
    if (launch == 1 && find_program(plan.launcher, plan.child_env).empty())
      throw Error(plan.launcher + " not found in PATH");
    say("launch " + std::to_string(launch) + " (" + reason + "): np " +
        std::to_string(total_slots(*hosts)) + " on " +
        (plan.launcher == "srun" ? "the Slurm allocation" : host_list_string(*hosts)) +
        (pool_.blacklist_summary(now).empty() ? std::string()
                                              : "; left out: " + pool_.blacklist_summary(now)));
    if (o_.verbose) std::cerr << launcher_name() << ": command: " << format_command(plan.argv) << "\n";
    bool notified = false;
    ResumeWatcher watcher(launch);
    SupervisorOptions supervise;
    supervise.on_tick = [&] { return on_tick(*hosts, watcher.restored(), &notified); };
    supervise.on_stderr = [&](const char* data, std::size_t size) { watcher.feed(data, size); };
    const RunOutcome outcome = run_supervised(plan.argv, plan.child_env, supervise);
    if (outcome.exit_code == 0) {
      say("job finished (" + std::to_string(launch) + " launch(es))");
      return 0;
    }
    if (outcome.signal_forwarded != 0) return outcome.exit_code;
    const auto& failed = outcome.report.failed;
    const bool stopped = outcome.exit_code == hvd::elastic::kHostsChangedExitCode ||
                         (failed && failed->exit_code == hvd::elastic::kHostsChangedExitCode) ||
                         (notified && failed && failed->signal == SIGUSR1);
    if (stopped) {
      reason = "hosts changed";
      continue;
    }
    std::cerr << launcher_name() << ": " << failure_summary(outcome.report, plan.launcher, outcome.exit_code) << "\n";
    // A lost host is the cause even when a rank elsewhere is named (it failed talking to it).
    if (leave_out_lost_hosts(*hosts, watcher.launcher_text(), &reason)) {
      say(reason);
      continue;
    }
    if (!failed && hosts_gone(*hosts, &reason)) {
      say(reason);
      continue;
    }
    if (!failed) {
      say("error: not relaunching: " + plan.launcher + " named no failed rank and every host it "
          "ran on is still offered, so hvdrun cannot tell which slot to leave out");
      return outcome.exit_code;
    }
    std::string host = plan.launcher == "srun" ? failed->node : host_of_rank(*hosts, failed->rank);
    if (host.empty()) host = failed->node;
    int running = 0;
    for (const auto& h : *hosts)
      if (h.host == host) running = h.slots;
    const int cooldown = pool_.mark_failed(host, running, Clock::now());
    reason = describe(*failed) + " on host " + host + "; one slot of " + host + " left out " +
             (cooldown > 0 ? "for " + std::to_string(cooldown) + " s" : std::string("for good"));
    say(reason);
  }
}

}  // namespace

std::vector<std::string> lost_daemon_hosts(const std::string& launcher_output) {
  static const std::regex kLost(R"(Remote daemon:\s+\[\[\d+,\d+\],\d+\]\s+on node\s+(\S+))");
  std::vector<std::string> hosts;
  for (std::sregex_iterator it(launcher_output.begin(), launcher_output.end(), kLost), end; it != end; ++it)
    if (std::find(hosts.begin(), hosts.end(), (*it)[1].str()) == hosts.end()) hosts.push_back((*it)[1].str());
  return hosts;
}

LaunchPlan elastic_launch_plan(const LaunchOptions& options, const LaunchContext& context,
                               const std::vector<HostSlots>& hosts,
                               const std::vector<std::string>& excluded, const std::string& job) {
  LaunchOptions o = options;
  LaunchContext ctx = context;
  set_env(&ctx.env, "HOROVOD_ELASTIC_JOB", job);
  const bool slurm = inside_slurm(ctx.env);
  o.np = total_slots(hosts);
  o.hosts = slurm ? std::string() : host_list_string(hosts);
  LaunchPlan plan = build_launch_plan(o, ctx);
  set_env(&plan.added, "HOROVOD_ELASTIC_JOB", job);
  if (plan.launcher == "srun" && !excluded.empty())
    plan.argv.insert(plan.argv.begin() + 1, "--exclude=" + joined(excluded));
  return plan;
}

int run_elastic(const LaunchOptions& options, const LaunchContext& context) {
  if (options.dry_run) {
    const auto hosts = discover_hosts(options.host_discovery_script, options.slots_per_host, context.env);
    HostPool pool(std::nullopt);
    pool.set_discovered(hosts);
    const int max_np = options.max_np > 0 ? options.max_np : 1 << 30;
    const auto first = pool.assign(std::min(total_slots(hosts), max_np), Clock::now());
    LaunchPlan plan = elastic_launch_plan(options, context, first, {}, "JOB");
    std::cout << launcher_name() << ": elastic: discovery offers " << host_list_string(hosts) << "\n";
    std::cout << launcher_name() << ": command: " << format_command(plan.argv) << "\n";
    for (const auto& [name, value] : plan.added)
      std::cout << launcher_name() << ": environment added: " << name << "=" << shell_quote(value) << "\n";
    return 0;
  }
  return Driver(options, context).run();
}

}  // namespace hvd::launcher
