// The one way the addon reads an options object from JS (a program, a communicator's options): field by
// field, each checked for its type and range, so a missing or mistyped field is an ERR_SPMD_INVALID
// TypeError that names it ("program.ops[2].root: ..."), never a silent default. A field that may be left
// out says so where it is read, with the value that stands for it. A reader remembers the fields it was
// asked for, so rejectUnread() can refuse the ones nobody reads: a field the writer meant and the reader
// never heard of is drift between the two, not something to skip.
#pragma once
#include <napi.h>

#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace spmd::addon {

class OptionReader {
 public:
  // `where` prefixes every message: "program.", "Communicator options.".
  OptionReader(Napi::Value v, std::string where);

  bool has(const char* key) const { return !field(key).IsUndefined(); }
  // The field as it is, for values the caller checks itself (a Buffer, a wrapped native object).
  Napi::Value value(const char* key) const { return field(key); }
  // Whether a field that may be null is; a missing one fails, as `expected` (what else it may be) says.
  bool isNull(const char* key, const std::string& expected) const;
  Napi::Env env() const { return obj_.Env(); }
  double number(const char* key) const;
  double number(const char* key, double absent) const;
  int64_t integer(const char* key, int64_t lo, int64_t hi) const;
  int64_t integer(const char* key, int64_t absent, int64_t lo, int64_t hi) const;
  bool boolean(const char* key) const;
  bool boolean(const char* key, bool absent) const;
  std::string string(const char* key) const;
  std::string string(const char* key, const char* absent) const;
  Napi::Array array(const char* key) const;
  // The object at `key`, read with this reader's prefix + key + ".".
  OptionReader object(const char* key) const;
  // The object at index i of `array`, as "<key>[i].".
  OptionReader element(const Napi::Array& array, const char* key, uint32_t i) const;
  // Integers in [0, limit).
  std::vector<int> indices(const char* key, size_t limit) const;
  // The same for an array found inside the field `key` (errors name `key`).
  std::vector<int> indicesIn(const Napi::Array& a, const char* key, size_t limit) const;

  [[noreturn]] void fail(const std::string& key, const std::string& expected) const;
  // Fails on the first field of the object that was not read, as no field of `what` ("op kind barrier").
  void rejectUnread(const std::string& what) const;
  const std::string& where() const { return where_; }

 private:
  Napi::Value get(const char* key, const char* expected, bool (Napi::Value::*is)() const) const;
  Napi::Value field(const char* key) const;

  Napi::Object obj_;
  std::string where_;
  mutable std::set<std::string> read_;  // the fields asked for, for rejectUnread
};

}  // namespace spmd::addon
