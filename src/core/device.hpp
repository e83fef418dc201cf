/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave core: devices by ordinal.
#pragma once

#include "cuweave/device.h"
#include "driver/driver.hpp"
#include "driver/error.hpp"

namespace cw {
namespace core {

// Initialises the driver and maps a device ordinal to its CUdevice;
// CW_ERROR_INVALID_ARGUMENT (with the device count) when out of range.
cw_status device_from_ordinal(int ordinal, CUdevice *dev);
// Devices the driver sees.
cw_status device_count(int *count);
// What cw_device_get_info reports.
cw_status device_info(int ordinal, cw_device_info *info);
// The device's primary-context priority range, cached per device.
cw_status device_priority_range(int ordinal, int *least, int *greatest);

}  // namespace core
}  // namespace cw
