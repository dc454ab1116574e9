// JS class `TcpEndpoint`: the listening socket a rank opens before the ranks exchange addresses, so it can
// publish the port the kernel picked. `new Communicator({ backend: "tcp", endpoint, ... })` takes it over.
#pragma once
#include <napi.h>

#include <memory>

#include "backends/tcp/connector.h"

namespace spmd::addon {

class TcpEndpointWrap : public Napi::ObjectWrap<TcpEndpointWrap> {
 public:
  static Napi::Function define(Napi::Env env);
  explicit TcpEndpointWrap(const Napi::CallbackInfo& info);  // ({ address, peers })

  // The listening socket of a JS TcpEndpoint (empty once taken); a JS TypeError for any other value.
  static tcp::Fd takeListener(Napi::Env env, Napi::Value v);

 private:
  Napi::Value getAddress(const Napi::CallbackInfo& info);
  Napi::Value getPort(const Napi::CallbackInfo& info);

  std::unique_ptr<tcp::Endpoint> endpoint_;
};

}  // namespace spmd::addon
