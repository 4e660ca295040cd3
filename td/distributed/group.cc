#include "td/distributed/group.h"

#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "td/core/errors.h"

namespace td {
namespace distributed {
namespace {

int EnvInt(const char* name, int fallback, long lo, long hi) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  long x = std::strtol(v, &end, 10);
  if (*end != '\0' || x < lo || x > hi) {
    TD_FAIL(ValueError, "td::distributed::options_from_env: ", name, "='", v,
                     "' is not an integer in [", lo, ", ", hi, "]");
  }
  return static_cast<int>(x);
}

// "eth1,eth2" -> {"eth1", "eth2"}; an empty name is a ValueError.
std::vector<std::string> SplitCommas(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    size_t comma = s.find(',', start);
    std::string part =
        s.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (part.empty()) {
      TD_FAIL(ValueError, "td::distributed::init_process_group: device_interface '", s,
              "' holds an empty interface name");
    }
    out.push_back(part);
    if (comma == std::string::npos) return out;
    start = comma + 1;
  }
}

void Validate(const GroupOptions& o) {
  if (o.world_size() < 1) {
    TD_FAIL(ValueError, "td::distributed::init_process_group: world_size must be >= 1, got ",
                     o.world_size());
  }
  if (o.rank() < 0 || o.rank() >= o.world_size()) {
    TD_FAIL(ValueError, "td::distributed::init_process_group: rank ", o.rank(),
                     " is outside [0, world_size=", o.world_size(), ")");
  }
  if (o.file_store_path().empty() && (o.master_port() < 1 || o.master_port() > 65535)) {
    TD_FAIL(ValueError, "td::distributed::init_process_group: master_port ", o.master_port(),
                     " is outside 1..65535");
  }
  if (!o.device_hostname().empty() && !o.device_interface().empty()) {
    TD_FAIL(ValueError, "td::distributed::init_process_group: device_hostname '",
            o.device_hostname(), "' and device_interface '", o.device_interface(),
            "' are both set; set at most one");
  }
  if (!o.device_interface().empty()) SplitCommas(o.device_interface());
  if (o.timeout().count() <= 0) {
    TD_FAIL(ValueError, "td::distributed::init_process_group: timeout must be positive");
  }
}

bool IsLoopback(const std::string& addr) {
  return addr == "127.0.0.1" || addr == "localhost" || addr == "::1";
}

}  // namespace

GroupOptions options_from_env(const GroupOptions& defaults) {
  GroupOptions o = defaults;
  if (const char* a = std::getenv("MASTER_ADDR"); a != nullptr && *a != '\0') o.master_addr(a);
  o.master_port(EnvInt("MASTER_PORT", o.master_port(), 1, 65535));
  o.world_size(EnvInt("WORLD_SIZE", o.world_size(), 1, 1 << 24));
  o.rank(EnvInt("RANK", o.rank(), 0, o.world_size() - 1));
  o.local_rank(EnvInt("LOCAL_RANK", o.local_rank(), 0, 1 << 24));
  if (const char* i = std::getenv("GLOO_SOCKET_IFNAME"); i != nullptr && *i != '\0') {
    o.device_interface(i);
    o.device_hostname("");
  }
  return o;
}

ProcessGroupPtr init_process_group(const GroupOptions& o) {
  Validate(o);
  std::string where;
  try {
    c10::intrusive_ptr<c10d::Store> store;
    if (!o.file_store_path().empty()) {
      where = "FileStore " + o.file_store_path();
      store = c10::make_intrusive<c10d::FileStore>(o.file_store_path(), o.world_size());
      store->setTimeout(o.timeout());
    } else {
      where = c10::str("TCPStore ", o.master_addr(), ":", o.master_port());
      c10d::TCPStoreOptions so;
      so.port = static_cast<std::uint16_t>(o.master_port());
      so.isServer = o.rank() == 0;
      so.numWorkers = static_cast<std::size_t>(o.world_size());
      so.waitWorkers = true;
      so.timeout = o.timeout();
      compat::UseClassicTcpStoreServer(so);
      store = c10::make_intrusive<c10d::TCPStore>(o.master_addr(), so);
    }
    auto gloo = c10d::ProcessGroupGloo::Options::create(o.timeout());
    std::string host = o.device_hostname();
    if (!o.device_interface().empty()) {
      where += ", Gloo on interface(s) " + o.device_interface();
      for (const std::string& name : SplitCommas(o.device_interface())) {
        gloo->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(name));
      }
    } else {
      if (host.empty() && IsLoopback(o.master_addr())) host = "127.0.0.1";
      if (!host.empty()) where += ", Gloo on " + host;
      gloo->devices.push_back(host.empty()
                                  ? c10d::ProcessGroupGloo::createDefaultDevice()
                                  : c10d::ProcessGroupGloo::createDeviceForHostname(host));
    }
    gloo->threads = o.threads();
    return c10::make_intrusive<c10d::ProcessGroupGloo>(store, o.rank(), o.world_size(), gloo);
  } catch (const c10::Error& e) {
    TD_FAIL(TransportError, "td::distributed::init_process_group: rank ", o.rank(), " of ",
                         o.world_size(), " could not join the group via ", where, ": ",
                         e.what_without_backtrace());
  } catch (const std::exception& e) {
    TD_FAIL(TransportError, "td::distributed::init_process_group: rank ", o.rank(), " of ",
                         o.world_size(), " could not join the group via ", where, ": ", e.what());
  }
}

}  // namespace distributed
}  // namespace td
