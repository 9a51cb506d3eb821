// Device discovery (cuda_device_present is declared in core/cuda.hpp).
#pragma once

#include "gemmtune/device.hpp"

namespace gemmtune {

// Properties and versions of device `index`; throws Error without a usable device.
DeviceInfo query_device(int index);

}  // namespace gemmtune
