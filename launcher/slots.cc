#include "launcher/slots.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace kolo::launcher {

std::string Slot::Name() const { return absl::StrCat(host, ":", index); }

SlotTable::SlotTable(SlotPolicy policy, Clock clock)
    : policy_(policy), clock_(std::move(clock)) {}

HostChange SlotTable::SetHosts(const std::vector<HostSlots>& hosts) {
  // Merge duplicates, keeping the order of first appearance.
  std::vector<std::string> order;
  std::map<std::string, int> count;
  for (const HostSlots& h : hosts) {
    if (count.count(h.name) == 0) order.push_back(h.name);
    count[h.name] += h.slots;
  }
  std::map<std::string, bool> was_present;
  for (const Slot& s : slots_) was_present[s.host] |= s.present;

  HostChange change;
  std::map<std::string, int> known;  // slots in the table per host
  for (size_t i = 0; i < slots_.size(); ++i) {
    Slot& s = slots_[i];
    ++known[s.host];
    auto it = count.find(s.host);
    bool present = it != count.end() && s.index < it->second;
    if (present && !s.present)
      change.added_slots.push_back(static_cast<int>(i));
    if (!present && s.present) {
      s.wanted = false;
      if (s.running) change.to_stop.push_back(static_cast<int>(i));
    }
    s.present = present;
  }
  for (const std::string& host : order) {
    for (int index = known[host]; index < count[host]; ++index) {
      Slot s;
      s.host = host;
      s.index = index;
      change.added_slots.push_back(static_cast<int>(slots_.size()));
      slots_.push_back(std::move(s));
    }
    if (!was_present[host]) change.added_hosts.push_back(host);
  }
  for (const auto& [host, present] : was_present) {
    if (present && count.count(host) == 0) change.removed_hosts.push_back(host);
  }
  return change;
}

int SlotTable::Want(const std::vector<int>& candidates, int n) {
  int room = policy_.max_workers > 0
                 ? std::max(0, policy_.max_workers - WantedOrRunning())
                 : static_cast<int>(slots_.size());
  int wanted = 0;
  for (int i : candidates) {
    if (wanted >= n || wanted >= room) break;
    Slot& s = slots_.at(static_cast<size_t>(i));
    if (!s.present || s.wanted || s.running) continue;
    s.wanted = true;
    ++wanted;
  }
  return wanted;
}

int SlotTable::Want(int n) {
  std::vector<int> all(slots_.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int>(i);
  return Want(all, n);
}

void SlotTable::UnwantAll() {
  for (Slot& s : slots_) s.wanted = false;
}

absl::Time SlotTable::HostBlacklistedUntil(const std::string& host) const {
  const absl::Time now = clock_();
  absl::Time until = absl::InfinitePast();
  for (const Slot& s : slots_) {
    if (s.host != host) continue;
    if (s.running) return absl::InfinitePast();
    if (s.cooldown_until > now) until = std::max(until, s.cooldown_until);
  }
  return until;
}

bool SlotTable::CanStart(const Slot& s, absl::Time now) const {
  return s.present && !s.running && s.cooldown_until <= now &&
         HostBlacklistedUntil(s.host) <= now;
}

std::vector<int> SlotTable::Startable() const {
  const absl::Time now = clock_();
  std::vector<int> out;
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (slots_[i].wanted && CanStart(slots_[i], now))
      out.push_back(static_cast<int>(i));
  }
  return out;
}

int SlotTable::HostSlotCount(const std::string& host) const {
  int n = 0;
  for (const Slot& s : slots_) n += (s.host == host && s.present) ? 1 : 0;
  return n;
}

WorkerIdentity SlotTable::Start(int slot) {
  Slot& s = slots_.at(static_cast<size_t>(slot));
  if (s.worker_id.empty()) {
    s.worker_number = next_worker_number_++;
    s.worker_id = absl::StrCat("w", s.worker_number);
  }
  s.running = true;
  s.started_at = clock_();
  WorkerIdentity id;
  id.slot = slot;
  id.worker_id = s.worker_id;
  id.worker_number = s.worker_number;
  id.incarnation = s.next_incarnation++;
  id.host = s.host;
  id.local_index = s.index;
  id.host_slots = HostSlotCount(s.host);
  return id;
}

EndDecision SlotTable::Ended(int slot, WorkerEnd how) {
  const absl::Time now = clock_();
  Slot& s = slots_.at(static_cast<size_t>(slot));
  s.running = false;
  EndDecision d;
  const std::string who =
      absl::StrCat("slot ", s.Name(), " (worker ", s.worker_id, ")");
  if (how != WorkerEnd::kFailed) {
    s.wanted = false;
    if (how == WorkerEnd::kSucceeded) s.streak = 0;
    return d;
  }
  s.streak = now - s.started_at >= policy_.healthy_run ? 1 : s.streak + 1;
  if (s.streak >= 2) {
    d.cooldown = policy_.cooldown_lo;
    for (int k = 2; k < s.streak && d.cooldown < policy_.cooldown_hi; ++k)
      d.cooldown *= 2;
    d.cooldown = std::min(d.cooldown, policy_.cooldown_hi);
  }
  s.cooldown_until = now + d.cooldown;
  d.host_blacklisted = HostBlacklistedUntil(s.host) > now;
  if (!s.present || !s.wanted) {
    d.message = absl::StrCat(who, " failed; not replaced (",
                             s.present ? "no worker is wanted there any more"
                                       : "its host left the job",
                             ")");
    s.wanted = false;
    return d;
  }
  if (d.cooldown == absl::ZeroDuration() && CanStart(s, now)) {
    d.replace = true;
    d.replacement_slot = slot;
    d.message = absl::StrCat(who, " failed; replacing it at once as ",
                             s.worker_id, " incarnation ", s.next_incarnation);
    return d;
  }
  std::string cooling = d.cooldown > absl::ZeroDuration()
                            ? absl::StrCat(who, " failed ", s.streak,
                                           " times in a row; cooling down ",
                                           absl::FormatDuration(d.cooldown))
                            : absl::StrCat(who, " failed");
  if (d.host_blacklisted) {
    absl::StrAppend(&cooling, "; host ", s.host,
                    " has no live worker: blacklisted until the cooldown ends");
  }
  d.replace = true;
  for (size_t j = 0; j < slots_.size(); ++j) {
    Slot& other = slots_[j];
    if (static_cast<int>(j) == slot || other.wanted || !CanStart(other, now))
      continue;
    s.wanted = false;
    other.wanted = true;
    d.replacement_slot = static_cast<int>(j);
    d.message = absl::StrCat(cooling, "; its replacement starts on free slot ",
                             other.Name());
    return d;
  }
  d.replacement_slot = slot;
  d.message = absl::StrCat(cooling,
                           "; no free slot elsewhere: it gets a worker again "
                           "when the cooldown ends");
  return d;
}

bool SlotTable::Pending() const {
  for (const Slot& s : slots_) {
    if (s.wanted && s.present && !s.running) return true;
  }
  return false;
}

absl::Time SlotTable::NextCooldownEnd() const {
  const absl::Time now = clock_();
  absl::Time next = absl::InfiniteFuture();
  for (const Slot& s : slots_) {
    if (s.wanted && s.cooldown_until > now)
      next = std::min(next, s.cooldown_until);
  }
  return next;
}

int SlotTable::Running() const {
  int n = 0;
  for (const Slot& s : slots_) n += s.running ? 1 : 0;
  return n;
}

int SlotTable::WantedOrRunning() const {
  int n = 0;
  for (const Slot& s : slots_) n += (s.wanted || s.running) ? 1 : 0;
  return n;
}

}  // namespace kolo::launcher
