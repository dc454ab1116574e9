#include "addon/options.h"

#include <cmath>

#include "addon/errors.h"

namespace spmd::addon {
namespace {

std::string typeOf(const Napi::Value& v) {
  if (v.IsUndefined()) return "missing";
  if (v.IsNull()) return "null";
  if (v.IsArray()) return "an array";
  if (v.IsString()) return "a string";
  if (v.IsNumber()) return "a number";
  if (v.IsBoolean()) return "a boolean";
  return v.IsObject() ? "an object" : "another type";
}

}  // namespace

OptionReader::OptionReader(Napi::Value v, std::string where) : where_(std::move(where)) {
  if (!v.IsObject() || v.IsArray()) {
    std::string name = where_.empty() || where_.back() != '.' ? where_ : where_.substr(0, where_.size() - 1);
    throwInvalid(v.Env(), name + ": expected an object, got " + typeOf(v));
  }
  obj_ = v.As<Napi::Object>();
}

void OptionReader::fail(const std::string& key, const std::string& expected) const {
  Napi::Value v = obj_.Get(key);
  const std::string what = v.IsUndefined() ? "missing, expected " + expected : "expected " + expected + ", got " + typeOf(v);
  throwInvalid(obj_.Env(), where_ + key + ": " + what);
}

Napi::Value OptionReader::field(const char* key) const {
  read_.insert(key);
  return obj_.Get(key);
}

bool OptionReader::isNull(const char* key, const std::string& expected) const {
  Napi::Value v = field(key);
  if (v.IsUndefined()) fail(key, expected + " or null");
  return v.IsNull();
}

void OptionReader::rejectUnread(const std::string& what) const {
  Napi::Array names = obj_.GetPropertyNames();
  for (uint32_t i = 0; i < names.Length(); ++i) {
    std::string name = names.Get(i).ToString().Utf8Value();
    if (!read_.count(name)) throwInvalid(obj_.Env(), where_ + name + ": not a field of " + what);
  }
}

Napi::Value OptionReader::get(const char* key, const char* expected, bool (Napi::Value::*is)() const) const {
  Napi::Value v = field(key);
  if (!(v.*is)()) fail(key, expected);
  return v;
}

double OptionReader::number(const char* key) const {
  return get(key, "a number", &Napi::Value::IsNumber).As<Napi::Number>().DoubleValue();
}
double OptionReader::number(const char* key, double absent) const { return has(key) ? number(key) : absent; }

int64_t OptionReader::integer(const char* key, int64_t lo, int64_t hi) const {
  const std::string expected = "an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  Napi::Value v = field(key);
  if (!v.IsNumber()) fail(key, expected);
  double d = v.As<Napi::Number>().DoubleValue();
  if (d != std::floor(d) || d < double(lo) || d > double(hi)) {
    throwInvalid(obj_.Env(), where_ + key + ": expected " + expected + ", got " + v.ToString().Utf8Value());
  }
  return int64_t(d);
}
int64_t OptionReader::integer(const char* key, int64_t absent, int64_t lo, int64_t hi) const {
  return has(key) ? integer(key, lo, hi) : absent;
}

bool OptionReader::boolean(const char* key) const {
  return get(key, "a boolean", &Napi::Value::IsBoolean).As<Napi::Boolean>().Value();
}
bool OptionReader::boolean(const char* key, bool absent) const { return has(key) ? boolean(key) : absent; }

std::string OptionReader::string(const char* key) const {
  return get(key, "a string", &Napi::Value::IsString).As<Napi::String>().Utf8Value();
}
std::string OptionReader::string(const char* key, const char* absent) const { return has(key) ? string(key) : absent; }

Napi::Array OptionReader::array(const char* key) const {
  return get(key, "an array", &Napi::Value::IsArray).As<Napi::Array>();
}

OptionReader OptionReader::object(const char* key) const { return OptionReader(field(key), where_ + key + "."); }

OptionReader OptionReader::element(const Napi::Array& array, const char* key, uint32_t i) const {
  return OptionReader(array.Get(i), where_ + key + "[" + std::to_string(i) + "].");
}

std::vector<int> OptionReader::indices(const char* key, size_t limit) const { return indicesIn(array(key), key, limit); }

std::vector<int> OptionReader::indicesIn(const Napi::Array& a, const char* key, size_t limit) const {
  std::vector<int> out;
  for (uint32_t i = 0; i < a.Length(); ++i) {
    Napi::Value v = a.Get(i);
    double d = v.IsNumber() ? v.As<Napi::Number>().DoubleValue() : -1;
    if (d != std::floor(d) || d < 0 || d >= double(limit)) fail(key, "indices below " + std::to_string(limit));
    out.push_back(int(d));
  }
  return out;
}

}  // namespace spmd::addon
