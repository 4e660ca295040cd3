# The libraries tensordict builds on, found the same way by the build (CMakeLists.txt) and by
# find_package(tensordict) (tensordictConfig.cmake, where TD_FIND_AS_DEPENDENCY is set, so a
# missing one makes find_package(tensordict) report itself not found instead of stopping).
# LibTorch comes first: the C++ standard follows its version (NOTE [ C++ standard ] in
# tensordict_deps.bzl; C++17 for 1.x, C++20 for 2.x).
include(CMakeFindDependencyMacro)

macro(td_find_package)
  if(TD_FIND_AS_DEPENDENCY)
    find_dependency(${ARGN})
  else()
    find_package(${ARGN} REQUIRED)
  endif()
endmacro()

td_find_package(Torch)
td_find_package(absl)
td_find_package(TBB)
td_find_package(nlohmann_json)
# CMake's FindHDF5 compiles a C probe: a C++-only consumer project gets C enabled here.
get_property(_td_languages GLOBAL PROPERTY ENABLED_LANGUAGES)
if(NOT "C" IN_LIST _td_languages)
  enable_language(C)
endif()
td_find_package(HDF5 COMPONENTS C)
# The decompressors of tensordict::bytes_codec (td/bytes/codec.h): zlib through CMake's FindZLIB;
# libzstd and c-blosc 1.x by header and library (Debian's libblosc-dev installs no CMake
# package, libzstd-dev's differs across releases), as the imported targets td_ext::zstd and
# td_ext::blosc, which the exported targets name.
td_find_package(ZLIB)
macro(td_find_system_library name header library)
  if(NOT TARGET td_ext::${name})
    find_path(TD_${name}_INCLUDE_DIR ${header})
    find_library(TD_${name}_LIBRARY ${library})
    if(NOT TD_${name}_INCLUDE_DIR OR NOT TD_${name}_LIBRARY)
      set(_td_missing "${header} / lib${library} not found (Debian: tools/install_deps.sh)")
      if(TD_FIND_AS_DEPENDENCY)
        set(${CMAKE_FIND_PACKAGE_NAME}_NOT_FOUND_MESSAGE "tensordict: ${_td_missing}")
        set(${CMAKE_FIND_PACKAGE_NAME}_FOUND FALSE)
        return()
      endif()
      message(FATAL_ERROR "tensordict: ${_td_missing}")
    endif()
    add_library(td_ext::${name} UNKNOWN IMPORTED)
    set_target_properties(td_ext::${name} PROPERTIES
      IMPORTED_LOCATION "${TD_${name}_LIBRARY}"
      INTERFACE_INCLUDE_DIRECTORIES "${TD_${name}_INCLUDE_DIR}")
  endif()
endmacro()
td_find_system_library(zstd zstd.h zstd)
td_find_system_library(blosc blosc.h blosc)
td_find_package(Threads)

if(Torch_VERSION VERSION_LESS 2)
  set(TD_CXX_STANDARD 17)
else()
  set(TD_CXX_STANDARD 20)
endif()

# Gloo's process group is compiled in when LibTorch's headers come with gloo's
# (tensordict_deps.bzl decides the same for @tensordict_libtorch//:c10d).
set(TD_C10D_DEFINITIONS USE_DISTRIBUTED USE_RPC USE_TENSORPIPE)
foreach(_td_dir IN LISTS TORCH_INCLUDE_DIRS)
  if(EXISTS "${_td_dir}/gloo")
    list(APPEND TD_C10D_DEFINITIONS USE_C10D_GLOO)
    break()
  endif()
endforeach()

# AOTInductor's package loader (torch::inductor::AOTIModelPackageLoader, LibTorch 2.6 and later;
# not 1.13), detected from its header as tensordict_deps.bzl detects it for td/compat/aoti.bzl:
# the generated CMakeLists.txt define tensordict::nn_aoti and tensordict::compat_aoti (and the
# test) only where TD_LIBTORCH_HAS_AOTI is true, and find_package(tensordict) sets it too.
set(TD_LIBTORCH_HAS_AOTI OFF)
foreach(_td_dir IN LISTS TORCH_INCLUDE_DIRS)
  if(EXISTS "${_td_dir}/torch/csrc/inductor/aoti_package/model_package_loader.h")
    set(TD_LIBTORCH_HAS_AOTI ON)
    break()
  endif()
endforeach()
