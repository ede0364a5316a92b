#pragma once

#include "loadgen.h"

namespace feed::loadgen {

// ----------------------------------------------------------------------------- histogram ----

// HdrHistogram-style log-linear histogram of non-negative microsecond values: values below
// 2048 have their own bucket (1 us resolution); above, every power of two [2^k, 2^(k+1)) is cut
// into 1024 equal buckets (relative error <= 1/1024). Values above kMaxUs are clamped (and
// counted in clamped()). ~17.4k counters, 140 KB.
class Histogram {
 public:
  static constexpr int kSubBits = 11;
  static constexpr uint64_t kSubCount = uint64_t{1} << kSubBits;  // 2048
  static constexpr uint64_t kHalf = kSubCount / 2;                // 1024
  static constexpr uint64_t kMaxUs = 60'000'000;                  // 60 s

  Histogram() : counts_(IndexOf(kMaxUs) + 1, 0) {}

  static size_t IndexOf(uint64_t v) {
    if (v < kSubCount) return static_cast<size_t>(v);
    int msb = 63 - __builtin_clzll(v);
    int shift = msb - (kSubBits - 1);  // >= 1; (v >> shift) in [1024, 2048)
    return static_cast<size_t>(kSubCount + static_cast<uint64_t>(shift - 1) * kHalf +
                               ((v >> shift) - kHalf));
  }
  // The largest value that falls into bucket idx.
  static uint64_t HighestEquivalent(size_t idx) {
    if (idx < kSubCount) return idx;
    uint64_t k = idx - kSubCount;
    uint64_t shift = k / kHalf + 1;
    uint64_t sub = k % kHalf + kHalf;
    return ((sub + 1) << shift) - 1;
  }

  void Record(int64_t us) {
    uint64_t v = us < 0 ? 0 : static_cast<uint64_t>(us);
    if (v > kMaxUs) {
      v = kMaxUs;
      ++clamped_;
    }
    ++counts_[IndexOf(v)];
    ++total_;
    sum_ += v;
    max_ = std::max(max_, v);
    min_ = std::min(min_, v);
  }

  void Merge(const Histogram& o) {
    for (size_t i = 0; i < counts_.size(); ++i) counts_[i] += o.counts_[i];
    total_ += o.total_;
    sum_ += o.sum_;
    clamped_ += o.clamped_;
    max_ = std::max(max_, o.max_);
    min_ = std::min(min_, o.min_);
  }

  uint64_t count() const { return total_; }
  uint64_t clamped() const { return clamped_; }
  uint64_t max() const { return total_ ? max_ : 0; }
  uint64_t min() const { return total_ ? min_ : 0; }
  double mean() const {
    return total_ ? static_cast<double>(sum_) / static_cast<double>(total_) : 0;
  }

  // The value below or at which p percent of the samples fall (highest equivalent value of the
  // bucket holding the ceil(p/100 * n)-th sample, capped at the recorded maximum).
  uint64_t Percentile(double p) const {
    if (total_ == 0) return 0;
    auto rank = static_cast<uint64_t>(std::ceil(p / 100.0 * static_cast<double>(total_)));
    rank = std::clamp<uint64_t>(rank, 1, total_);
    uint64_t seen = 0;
    for (size_t i = 0; i < counts_.size(); ++i) {
      seen += counts_[i];
      if (seen >= rank) return std::min(HighestEquivalent(i), max_);
    }
    return max_;
  }

  nlohmann::json Json() const {
    return {{"count", total_},
            {"p50", Percentile(50)},
            {"p90", Percentile(90)},
            {"p99", Percentile(99)},
            {"p999", Percentile(99.9)},
            {"max", max()},
            {"min", min()},
            {"mean", std::round(mean() * 10) / 10}};
  }

 private:
  std::vector<uint64_t> counts_;
  uint64_t total_ = 0;
  uint64_t sum_ = 0;
  uint64_t clamped_ = 0;
  uint64_t max_ = 0;
  uint64_t min_ = UINT64_MAX;
};

inline std::string FmtMs(uint64_t us) {
  return fmt::format("{:.3f}", static_cast<double>(us) / 1000.0);
}

}  // namespace feed::loadgen
