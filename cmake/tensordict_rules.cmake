# The functions the generated td/**/CMakeLists.txt call, one per Bazel rule kind of
# //tools:cc.bzl (NOTE [ CMake from Bazel ] in tools/bazel_to_cmake.py):
#   td_cmake_library(NAME [TESTONLY] [ALWAYSLINK] SRCS.. HDRS.. DEPS.. EXTERNAL.. COPTS.. LINKOPTS..)
#   td_cmake_test(NAME SRCS.. DEPS.. EXTERNAL.. COPTS.. LINKOPTS.. ARGS.. ENV.. LABELS.. TIMEOUT s)
#   td_cmake_binary(NAME [TESTONLY] SRCS.. DEPS.. EXTERNAL.. COPTS.. LINKOPTS..)
# NAME is the target's stem: the library is tensordict_<stem>, aliased and exported as
# tensordict::<stem>. DEPS are stems of other targets, EXTERNAL the names td_external_targets
# maps below. Libraries are shared (as Bazel links tests), installed with their headers under
# include/<package>/, except TESTONLY ones, which exist only with TENSORDICT_BUILD_TESTS.

# The warnings of //tools:cc.bzl, written by tools/bazel_to_cmake.py.
include(${CMAKE_CURRENT_LIST_DIR}/tensordict_warnings.cmake)
set(TD_OWN_OPTIONS ${TD_WARNINGS})
if(TENSORDICT_WERROR)
  list(APPEND TD_OWN_OPTIONS -Werror)
endif()
# Our own code on LibTorch 2.x builds without the deprecated c10:: aliases (as _TD_OWN_COPTS in
# //tools:cc.bzl); consumers do not get this.
if(TD_CXX_STANDARD GREATER 17)
  list(APPEND TD_OWN_OPTIONS -DC10_NODEPRECATED)
endif()

# out: the link items of Bazel's external labels (EXTERNAL in tools/bazel_to_cmake.py).
function(td_external_targets out)
  set(items)
  foreach(name IN LISTS ARGN)
    if(name STREQUAL "absl")
      list(APPEND items absl::base absl::flat_hash_map absl::flat_hash_set absl::function_ref
           absl::hash absl::inlined_vector absl::span absl::status absl::statusor
           absl::str_format absl::strings)
    elseif(name STREQUAL "torch" OR name STREQUAL "c10d")
      # The imported target only (TORCH_LIBRARIES adds c10 by its absolute path, which would
      # tie the exported targets to this machine's LibTorch).
      list(APPEND items torch Threads::Threads)
    elseif(name STREQUAL "torch_cuda")
      # LibTorch's CUDA libraries, for the packages only a CUDA LibTorch builds (CUDA_PACKAGES in
      # tools/bazel_to_cmake.py; CMakeLists.txt checks these targets exist when
      # TENSORDICT_CUDA is ON). CUDA::cudart brings cuda_runtime_api.h's directory.
      list(APPEND items torch torch_cuda c10_cuda Threads::Threads)
      if(TARGET CUDA::cudart)
        list(APPEND items CUDA::cudart)
      endif()
    elseif(name STREQUAL "tbb")
      list(APPEND items TBB::tbb)
    elseif(name STREQUAL "json")
      list(APPEND items nlohmann_json::nlohmann_json)
    elseif(name STREQUAL "hdf5")
      list(APPEND items hdf5::hdf5)
    elseif(name MATCHES "^(gtest|gtest_main|gmock|gmock_main)$")
      list(APPEND items GTest::${name})
    else()
      message(FATAL_ERROR "tensordict: no CMake target for Bazel's external '${name}'")
    endif()
  endforeach()
  set(${out} ${items} PARENT_SCOPE)
endfunction()

# Common to the three: sources, flags and links of `target` (scope PUBLIC, or INTERFACE for a
# library without sources).
function(_td_setup target scope)
  cmake_parse_arguments(PARSE_ARGV 2 arg "" "" "DEPS;EXTERNAL;COPTS;LINKOPTS")
  set(links)
  foreach(dep IN LISTS arg_DEPS)
    list(APPEND links tensordict::${dep})
  endforeach()
  td_external_targets(external ${arg_EXTERNAL})
  if("c10d" IN_LIST arg_EXTERNAL)
    target_compile_definitions(${target} ${scope} ${TD_C10D_DEFINITIONS})
  endif()
  target_include_directories(${target} ${scope}
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}> $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  target_compile_features(${target} ${scope} cxx_std_${TD_CXX_STANDARD})
  target_link_libraries(${target} ${scope} ${links} ${external} ${arg_LINKOPTS})
  if(NOT scope STREQUAL "INTERFACE")
    target_compile_options(${target} PRIVATE ${TD_OWN_OPTIONS} ${arg_COPTS})
  endif()
endfunction()

set(_td_kinds "TESTONLY;ALWAYSLINK")
set(_td_lists "SRCS;HDRS;DEPS;EXTERNAL;COPTS;LINKOPTS")

function(td_cmake_library name)
  cmake_parse_arguments(PARSE_ARGV 1 arg "${_td_kinds}" "" "${_td_lists}")
  if(arg_TESTONLY AND NOT TENSORDICT_BUILD_TESTS)
    return()
  endif()
  set(target tensordict_${name})
  set(sources ${arg_SRCS})
  list(FILTER sources INCLUDE REGEX "\\.(cc|cpp)$")
  if(sources)
    add_library(${target} SHARED ${sources})
    set(scope PUBLIC)
  else()
    add_library(${target} INTERFACE)
    set(scope INTERFACE)
  endif()
  add_library(tensordict::${name} ALIAS ${target})
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${name})
  _td_setup(${target} ${scope} DEPS ${arg_DEPS} EXTERNAL ${arg_EXTERNAL} COPTS ${arg_COPTS}
            LINKOPTS ${arg_LINKOPTS})
  if(arg_ALWAYSLINK)
    # Bazel's alwayslink: the library registers itself at load time, so it stays linked even
    # where no symbol of it is referenced (linkers that default to --as-needed would drop it).
    target_link_options(${target} INTERFACE "LINKER:--no-as-needed")
  endif()
  if(arg_TESTONLY)
    return()
  endif()
  # Installed, each library finds the others beside it and LibTorch where it was linked from.
  set_target_properties(${target} PROPERTIES INSTALL_RPATH "$ORIGIN"
                        INSTALL_RPATH_USE_LINK_PATH TRUE)
  install(TARGETS ${target} EXPORT tensordictTargets
          LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
          ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
  file(RELATIVE_PATH package ${PROJECT_SOURCE_DIR} ${CMAKE_CURRENT_SOURCE_DIR})
  foreach(header IN LISTS arg_SRCS arg_HDRS)
    if(header MATCHES "\\.(h|def|inc)$")
      get_filename_component(subdir ${header} DIRECTORY)
      install(FILES ${header} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/${package}/${subdir})
    endif()
  endforeach()
endfunction()

function(td_cmake_binary name)
  cmake_parse_arguments(PARSE_ARGV 1 arg "${_td_kinds}" "" "${_td_lists}")
  if(arg_TESTONLY AND NOT TENSORDICT_BUILD_TESTS)
    return()
  endif()
  add_executable(tensordict_${name} ${arg_SRCS})
  _td_setup(tensordict_${name} PUBLIC DEPS ${arg_DEPS} EXTERNAL ${arg_EXTERNAL}
            COPTS ${arg_COPTS} LINKOPTS ${arg_LINKOPTS})
endfunction()

# A test runs in the source root, as Bazel runs it in its runfiles tree, so the data files its
# BUILD rule lists are found at the same relative paths; $TEST_TMPDIR is a folder of its own in
# the build tree. The labels are Bazel's tags that CI selects on (multihost, slow, exclusive).
function(td_cmake_test name)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "TIMEOUT" "${_td_lists};ARGS;ENV;LABELS")
  if(NOT TENSORDICT_BUILD_TESTS)
    return()
  endif()
  add_executable(tensordict_${name} ${arg_SRCS})
  _td_setup(tensordict_${name} PUBLIC DEPS ${arg_DEPS} EXTERNAL ${arg_EXTERNAL}
            COPTS ${arg_COPTS} LINKOPTS ${arg_LINKOPTS})
  set(tmp ${CMAKE_CURRENT_BINARY_DIR}/${name}.tmp)
  file(MAKE_DIRECTORY ${tmp})
  add_test(NAME ${name} COMMAND tensordict_${name} ${arg_ARGS}
           WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(${name} PROPERTIES TIMEOUT ${arg_TIMEOUT}
                       ENVIRONMENT "TEST_TMPDIR=${tmp};${arg_ENV}")
  if(arg_LABELS)
    set_tests_properties(${name} PROPERTIES LABELS "${arg_LABELS}")
  endif()
  if("exclusive" IN_LIST arg_LABELS)
    set_tests_properties(${name} PROPERTIES RUN_SERIAL TRUE)
  endif()
endfunction()
