// gemmtune: the whole public API.
#pragma once

#include "gemmtune/engine.hpp"
#include "gemmtune/error.hpp"
#include "gemmtune/grouped.hpp"
#include "gemmtune/kernel.hpp"
#include "gemmtune/problem.hpp"
#include "gemmtune/report.hpp"
#include "gemmtune/tuning_cache.hpp"
