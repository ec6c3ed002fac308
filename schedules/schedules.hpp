// Umbrella header of the schedules library: IR, generators, validator, simulator, CSV, pictures.
// Plain C++17 with no Kokkos and no MPI, so any tool (or the MPI runtime) can include it.
// schedules/text.hpp (the JSON writer, nlohmann-json) is left out: only host-only libraries use it.
#pragma once

#include "schedules/action.hpp"
#include "schedules/csv.hpp"
#include "schedules/report.hpp"
#include "schedules/schedule.hpp"
#include "schedules/simulator.hpp"
#include "schedules/timeline.hpp"
#include "schedules/validator.hpp"
#include "schedules/variant.hpp"
