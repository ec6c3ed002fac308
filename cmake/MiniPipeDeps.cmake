# Finds every external dependency of miniPipe and papers over packaging differences in one place.
# Targets it guarantees: minipipe::kokkos, minipipe::kokkoskernels, MPI::MPI_CXX, minipipe::hdf5.

# --- Kokkos ------------------------------------------------------------------------------
# A standard Kokkos 4.x install (Kokkos_ROOT / CMAKE_PREFIX_PATH) exports Kokkos::kokkos with
# correct include paths. Debian's Trilinos-packaged Kokkos 3.4.01 exports an INTERFACE target
# whose include directory (<prefix>/include, i.e. /usr/lib/include) does not exist; its headers
# live in /usr/include/trilinos.
find_package(Kokkos REQUIRED)
add_library(minipipe_kokkos INTERFACE)
add_library(minipipe::kokkos ALIAS minipipe_kokkos)
get_target_property(_mp_kokkos_inc Kokkos::kokkos INTERFACE_INCLUDE_DIRECTORIES)
set(_mp_kokkos_fixed_inc "")
if(_mp_kokkos_inc)
  foreach(_dir IN LISTS _mp_kokkos_inc)
    if(_dir MATCHES "^\\$<" OR EXISTS "${_dir}")
      list(APPEND _mp_kokkos_fixed_inc "${_dir}")
    endif()
  endforeach()
  if(NOT _mp_kokkos_fixed_inc STREQUAL _mp_kokkos_inc)
    # Drop the missing directory: CMake refuses imported targets with non-existent includes.
    set_target_properties(Kokkos::kokkos PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${_mp_kokkos_fixed_inc}")
  endif()
endif()
find_path(MINIPIPE_KOKKOS_INCLUDE_DIR Kokkos_Core.hpp
  HINTS ${_mp_kokkos_fixed_inc} ${Kokkos_INCLUDE_DIRS} "${Kokkos_DIR}/../../../include" "${Kokkos_DIR}/../../../../include"
  PATH_SUFFIXES trilinos
  PATHS /usr/include)
if(NOT MINIPIPE_KOKKOS_INCLUDE_DIR)
  message(FATAL_ERROR "Kokkos_Core.hpp not found; set Kokkos_ROOT to a Kokkos install")
endif()
target_link_libraries(minipipe_kokkos INTERFACE Kokkos::kokkos)
target_include_directories(minipipe_kokkos SYSTEM INTERFACE "${MINIPIPE_KOKKOS_INCLUDE_DIR}")

# --- Kokkos Kernels ----------------------------------------------------------------------
# Kokkos Kernels 4.x exports Kokkos::kokkoskernels; the Trilinos package exports
# trilinos_kokkoskernels (and no include directory at all).
find_package(KokkosKernels REQUIRED)
add_library(minipipe_kokkoskernels INTERFACE)
add_library(minipipe::kokkoskernels ALIAS minipipe_kokkoskernels)
if(TARGET Kokkos::kokkoskernels)
  target_link_libraries(minipipe_kokkoskernels INTERFACE Kokkos::kokkoskernels minipipe::kokkos)
elseif(TARGET trilinos_kokkoskernels)
  target_link_libraries(minipipe_kokkoskernels INTERFACE trilinos_kokkoskernels minipipe::kokkos)
else()
  message(FATAL_ERROR "KokkosKernels found but it exports neither Kokkos::kokkoskernels nor trilinos_kokkoskernels")
endif()

# Version and backends, read from the installed config header so both packagings agree.
find_file(MINIPIPE_KOKKOS_CONFIG_H KokkosCore_config.h HINTS "${MINIPIPE_KOKKOS_INCLUDE_DIR}" NO_DEFAULT_PATH)
set(MINIPIPE_KOKKOS_VERSION "unknown")
set(MINIPIPE_KOKKOS_BACKENDS "")
if(MINIPIPE_KOKKOS_CONFIG_H)
  file(STRINGS "${MINIPIPE_KOKKOS_CONFIG_H}" _mp_ver REGEX "#define KOKKOS_VERSION ")
  if(_mp_ver MATCHES "KOKKOS_VERSION ([0-9]+)")
    math(EXPR _maj "${CMAKE_MATCH_1} / 10000")
    math(EXPR _min "(${CMAKE_MATCH_1} / 100) % 100")
    math(EXPR _pat "${CMAKE_MATCH_1} % 100")
    set(MINIPIPE_KOKKOS_VERSION "${_maj}.${_min}.${_pat}")
  endif()
  foreach(_be SERIAL OPENMP THREADS CUDA HIP SYCL OPENMPTARGET)
    file(STRINGS "${MINIPIPE_KOKKOS_CONFIG_H}" _mp_be REGEX "^#define KOKKOS_ENABLE_${_be}$")
    if(_mp_be)
      list(APPEND MINIPIPE_KOKKOS_BACKENDS ${_be})
    endif()
  endforeach()
endif()
message(STATUS "miniPipe: Kokkos ${MINIPIPE_KOKKOS_VERSION}, backends: ${MINIPIPE_KOKKOS_BACKENDS}")

# --- MPI, HDF5, BLAS, decks and flags ----------------------------------------------------
find_package(MPI REQUIRED COMPONENTS CXX)
set(_mp_mpi_lib "${MPI_CXX_LIBRARY_VERSION_STRING}")
if(NOT _mp_mpi_lib AND MPIEXEC_EXECUTABLE)
  execute_process(COMMAND ${MPIEXEC_EXECUTABLE} --version OUTPUT_VARIABLE _mp_mpi_lib ERROR_QUIET)
  string(REGEX REPLACE "\n.*" "" _mp_mpi_lib "${_mp_mpi_lib}")
endif()
message(STATUS "miniPipe: MPI ${MPI_CXX_VERSION} standard, ${_mp_mpi_lib} (launcher ${MPIEXEC_EXECUTABLE})")

set(HDF5_PREFER_PARALLEL TRUE)
find_package(HDF5 REQUIRED COMPONENTS C)
add_library(minipipe_hdf5 INTERFACE)
add_library(minipipe::hdf5 ALIAS minipipe_hdf5)
target_include_directories(minipipe_hdf5 SYSTEM INTERFACE ${HDF5_C_INCLUDE_DIRS} ${HDF5_INCLUDE_DIRS})
target_link_libraries(minipipe_hdf5 INTERFACE ${HDF5_C_LIBRARIES} ${HDF5_LIBRARIES} MPI::MPI_CXX)
target_compile_definitions(minipipe_hdf5 INTERFACE ${HDF5_DEFINITIONS})
if(HDF5_IS_PARALLEL)
  target_compile_definitions(minipipe_hdf5 INTERFACE MINIPIPE_HDF5_PARALLEL=1)
endif()
message(STATUS "miniPipe: HDF5 ${HDF5_VERSION} (parallel: ${HDF5_IS_PARALLEL})")

find_package(BLAS REQUIRED)
set(MINIPIPE_BLAS_NAME "${BLAS_LIBRARIES}")
message(STATUS "miniPipe: BLAS ${BLAS_LIBRARIES}")

find_package(tomlplusplus REQUIRED)
find_package(CLI11 REQUIRED)
# Header-only; linked PRIVATE by the host-only libraries that read or write JSON (schedules,
# minipipe_host), so no device-compiled translation unit sees it.
find_package(nlohmann_json 3 REQUIRED)
