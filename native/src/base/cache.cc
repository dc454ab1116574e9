#include "base/cache.h"

#include <fstream>
#include <string>

namespace spmd {
namespace {

constexpr size_t kFallbackBytes = 32u << 20;

size_t parseSize(const std::string& s) {
  size_t used = 0;
  unsigned long long v = 0;
  try {
    v = std::stoull(s, &used);
  } catch (...) {
    return 0;
  }
  const char unit = used < s.size() ? s[used] : ' ';
  return size_t(v) << (unit == 'K' ? 10 : unit == 'M' ? 20 : unit == 'G' ? 30 : 0);
}

}  // namespace

size_t lastLevelCacheBytes() {
  static const size_t bytes = [] {
    int bestLevel = 0;
    size_t best = 0;
    for (int i = 0; i < 8; ++i) {
      const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
      std::ifstream level(dir + "level"), size(dir + "size");
      int l = 0;
      std::string s;
      if (!(level >> l) || !(size >> s)) continue;
      if (l >= bestLevel) bestLevel = l, best = parseSize(s);
    }
    return best ? best : kFallbackBytes;
  }();
  return bytes;
}

}  // namespace spmd
