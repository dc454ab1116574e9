#include "addon/tcp_wrap.h"

#include "addon/errors.h"
#include "base/error.h"

namespace spmd::addon {
namespace {

// Marks JS objects made by this class, so takeListener() never unwraps anything else.
constexpr napi_type_tag kTcpEndpointTag = {0x7463702d656e6470ULL, 0x73706d642d746370ULL};

}  // namespace

Napi::Function TcpEndpointWrap::define(Napi::Env env) {
  return DefineClass(env, "TcpEndpoint",
                     {InstanceAccessor<&TcpEndpointWrap::getAddress>("address"),
                      InstanceAccessor<&TcpEndpointWrap::getPort>("port")});
}

TcpEndpointWrap::TcpEndpointWrap(const Napi::CallbackInfo& info) : Napi::ObjectWrap<TcpEndpointWrap>(info) {
  Napi::Env env = info.Env();
  if (!info[0].IsObject()) throwInvalid(env, "TcpEndpoint: expected { address, peers }");
  Napi::Object o = info[0].As<Napi::Object>();
  if (!o.Get("address").IsString()) throwInvalid(env, "TcpEndpoint: address must be a numeric IP address");
  int peers = o.Get("peers").IsNumber() ? o.Get("peers").As<Napi::Number>().Int32Value() : 0;
  try {
    endpoint_ = std::make_unique<tcp::Endpoint>(tcp::SocketAddress::parse(o.Get("address").As<Napi::String>().Utf8Value(), 0), peers);
  } catch (const CommError& e) {
    throw makeError(env, e.code(), e.what());
  }
  info.This().As<Napi::Object>().TypeTag(&kTcpEndpointTag);
}

tcp::Fd TcpEndpointWrap::takeListener(Napi::Env env, Napi::Value v) {
  if (!v.IsObject() || !v.As<Napi::Object>().CheckTypeTag(&kTcpEndpointTag)) throwInvalid(env, "tcp: expected a TcpEndpoint");
  return Unwrap(v.As<Napi::Object>())->endpoint_->takeListener();
}

Napi::Value TcpEndpointWrap::getAddress(const Napi::CallbackInfo& info) {
  return Napi::String::New(info.Env(), endpoint_->address().host());
}

Napi::Value TcpEndpointWrap::getPort(const Napi::CallbackInfo& info) {
  return Napi::Number::New(info.Env(), endpoint_->address().port());
}

}  // namespace spmd::addon
