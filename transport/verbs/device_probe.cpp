#include "transport/verbs/device_probe.h"

#include <infiniband/verbs.h>

namespace symmesh {

std::vector<std::string> verbs_devices() {
  int count = 0;
  ibv_device** devices = ibv_get_device_list(&count);
  std::vector<std::string> names;
  for (int i = 0; devices && i < count; ++i) names.emplace_back(ibv_get_device_name(devices[i]));
  if (devices) ibv_free_device_list(devices);
  return names;
}

}  // namespace symmesh
