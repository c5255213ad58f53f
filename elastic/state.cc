// kolo::elastic::State (include/kolo/elastic.h): the user's training state,
// its commits in host memory, and rank 0's state broadcast to every rank.
#include <cstring>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "kolo/elastic.h"
#include "kolo/kolo.h"
#include "worker_lib/fault_hook.h"

namespace kolo::elastic {

bool State::known(const std::string& name) const {
  for (const TensorEntry& t : tensors_) {
    if (t.name == name) return true;
  }
  for (const BlobEntry& b : blobs_) {
    if (b.name == name) return true;
  }
  return false;
}

absl::Status State::add_tensor(std::string name, void* data, int64_t count,
                               DataType type) {
  if (known(name)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "elastic::State::add_tensor('", name,
        "'): the name is registered already; give every tensor and blob of "
        "a State a distinct name"));
  }
  absl::StatusOr<int64_t> checked = CheckedElements(
      absl::StrCat("elastic::State::add_tensor('", name, "')"), type, {count});
  if (!checked.ok()) return checked.status();
  if (data == nullptr && count > 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("elastic::State::add_tensor('", name, "'): ", count,
                     " elements at a null pointer"));
  }
  tensors_.push_back(TensorEntry{std::move(name), data, count, type, {}});
  return absl::OkStatus();
}

absl::Status State::add_blob(std::string name, std::string* blob) {
  if (known(name)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "elastic::State::add_blob('", name,
        "'): the name is registered already; give every tensor and blob of "
        "a State a distinct name"));
  }
  if (blob == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("elastic::State::add_blob('", name, "'): a null blob"));
  }
  blobs_.push_back(BlobEntry{std::move(name), blob, {}});
  return absl::OkStatus();
}

void State::register_reset_callback(std::function<void()> callback) {
  on_reset_.push_back(std::move(callback));
}

absl::Status State::commit() {
  save();
  return check_host_updates();
}

void State::save() {
  for (TensorEntry& t : tensors_) {
    const size_t bytes = static_cast<size_t>(t.count) * DataTypeSize(t.type);
    t.saved.assign(static_cast<const char*>(t.data), bytes);
  }
  for (BlobEntry& b : blobs_) b.saved = *b.blob;
  committed_ = true;
  ++commits_;
  worker::faults::OnCommit(commits_);  // the recovery report's rollbacks
}

void State::restore() {
  if (!committed_) return;
  for (TensorEntry& t : tensors_) {
    if (!t.saved.empty()) std::memcpy(t.data, t.saved.data(), t.saved.size());
  }
  for (BlobEntry& b : blobs_) *b.blob = b.saved;
}

absl::Status State::sync() {
  for (TensorEntry& t : tensors_) {
    if (t.count == 0) continue;
    absl::Status s = broadcast(t.data, t.count, t.type, /*root=*/0);
    if (!s.ok()) return s;
  }
  for (BlobEntry& b : blobs_) {
    int64_t size = static_cast<int64_t>(b.blob->size());
    absl::Status s = broadcast(&size, 1, DataType::kInt64, /*root=*/0);
    if (!s.ok()) return s;
    if (size < 0 || size > kMaxTensorBytes) {
      return absl::InternalError(
          absl::StrCat("elastic::State::sync: rank 0's blob '", b.name,
                       "' has ", size, " bytes"));
    }
    b.blob->resize(static_cast<size_t>(size));
    if (size == 0) continue;
    s = broadcast(b.blob->data(), size, DataType::kUInt8, /*root=*/0);
    if (!s.ok()) return s;
  }
  save();
  return absl::OkStatus();
}

void State::on_reset() {
  for (const std::function<void()>& callback : on_reset_) callback();
}

}  // namespace kolo::elastic
