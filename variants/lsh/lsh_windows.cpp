#include "variants/lsh/lsh_windows.hpp"

#include <algorithm>

namespace seqattn::detail {

ChunkWindows::ChunkWindows(std::int64_t rows, std::int64_t prefix, std::int64_t prev_len,
                           std::int64_t chunk)
    : rows_(static_cast<size_t>(rows)),
      width_(std::min(2 * chunk, prefix + rows)),
      prefix_(prefix),
      prev_len_(prev_len) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t u = r / chunk;
    const std::int64_t lo = u == 0 ? prefix - prev_len : prefix + (u - 1) * chunk;
    rows_[static_cast<size_t>(r)] = {lo, prefix + std::min((u + 1) * chunk, rows)};
  }
}

std::shared_ptr<const ChunkWindows> WindowStore::get(std::int64_t rows, std::int64_t prefix,
                                                     std::int64_t prev_len) const {
  const std::lock_guard<std::mutex> lock(mutex_);
  const auto hit = std::find_if(kept_.begin(), kept_.end(),
                                [&](const auto& w) { return w->matches(rows, prefix, prev_len); });
  if (hit != kept_.end()) {
    std::rotate(hit, hit + 1, kept_.end());  // now the most recently used, at the back
    return kept_.back();
  }
  if (kept_.size() >= capacity_) kept_.erase(kept_.begin());
  kept_.push_back(std::make_shared<const ChunkWindows>(rows, prefix, prev_len, chunk_));
  return kept_.back();
}

}  // namespace seqattn::detail
