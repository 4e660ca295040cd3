# The functions the generated td/**/CMakeLists.txt call, one per Bazel rule kind of
# //tools:cc.bzl (NOTE [ CMake from Bazel ] in tools/bazel_to_cmake.py):
#   td_cmake_library(NAME [TESTONLY] [ALWAYSLINK] SRCS.. HDRS.. DEPS.. EXTERNAL.. COPTS.. LINKOPTS..)
#   td_cmake_test(NAME SRCS.. DEPS.. EXTERNAL.. COPTS.. LINKOPTS.. ARGS.. GENERATED.. ENV..
#                 LABELS.. TIMEOUT s)
#   td_cmake_binary(NAME [TESTONLY] SRCS.. DEPS.. EXTERNAL.. COPTS.. LINKOPTS..)
#   td_cmake_python_genrule(NAME PYTHON kind SCRIPT s OUT_DIR d OUTS..)
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
    elseif(name STREQUAL "zlib")
      list(APPEND items ZLIB::ZLIB)
    elseif(name STREQUAL "zstd" OR name STREQUAL "blosc")
      # Imported by cmake/tensordict_deps.cmake (td_find_system_library).
      list(APPEND items td_ext::${name})
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

# The Pythons td_cmake_python_genrule runs scripts with, by kind (CMAKE_GENRULES of
# tools/bazel_to_cmake.py): TD_PYTHON_<kind> is the interpreter, or empty with
# TD_PYTHON_<kind>_MISSING saying why. Looked for only where a genrule of the kind is defined.
#   aoti: torch that exports with AOTInductor (torch._inductor.aoti_compile_and_package), of
#         LibTorch's major.minor version (a package is loaded by the LibTorch it was compiled
#         for). -DPython3_EXECUTABLE=<python> picks the interpreter.
set(TD_PYTHON_aoti "")
if(TD_LIBTORCH_HAS_AOTI AND TENSORDICT_BUILD_TESTS)
  find_package(Python3 COMPONENTS Interpreter)
  if(NOT Python3_Interpreter_FOUND)
    set(TD_PYTHON_aoti_MISSING "no Python 3 found (-DPython3_EXECUTABLE=<python>)")
  else()
    execute_process(
      COMMAND ${Python3_EXECUTABLE} -c "import torch, torch._inductor
torch._inductor.aoti_compile_and_package
print(torch.__version__)"
      RESULT_VARIABLE _td_rc OUTPUT_VARIABLE _td_version ERROR_VARIABLE _td_error
      OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_STRIP_TRAILING_WHITESPACE)
    string(REGEX MATCH "[^\n]*$" _td_error "${_td_error}")
    if(NOT _td_rc EQUAL 0)
      set(TD_PYTHON_aoti_MISSING
          "${Python3_EXECUTABLE} cannot export with AOTInductor (${_td_error})")
    elseif(NOT _td_version MATCHES "^${Torch_VERSION_MAJOR}\\.${Torch_VERSION_MINOR}\\.")
      set(TD_PYTHON_aoti_MISSING
          "the torch of ${Python3_EXECUTABLE} is ${_td_version}, LibTorch is ${Torch_VERSION}")
    else()
      set(TD_PYTHON_aoti ${Python3_EXECUTABLE})
      message(STATUS "tensordict: AOTInductor test packages by ${Python3_EXECUTABLE} "
                     "(torch ${_td_version})")
    endif()
  endif()
endif()

# The outputs OUTS (all under OUT_DIR, relative to the package) of the Python script SCRIPT,
# run as `python SCRIPT <build tree>/<package>/OUT_DIR` (Bazel's genrule writes the same paths
# under its bin folder), for the tests that list it as GENERATED; defined with
# TENSORDICT_BUILD_TESTS only (the tests are all that read them here). The script gets a fresh
# TORCHINDUCTOR_CACHE_DIR; AOTInductor compiles with the g++ on PATH, as under Bazel. Where no
# Python of the kind was found, nothing is defined and the tests are skipped with the reason.
function(td_cmake_python_genrule name)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "PYTHON;SCRIPT;OUT_DIR" "OUTS")
  if(NOT TENSORDICT_BUILD_TESTS)
    return()
  endif()
  if(NOT TD_PYTHON_${arg_PYTHON})
    set_property(GLOBAL PROPERTY TD_GENRULE_MISSING_${name} "${TD_PYTHON_${arg_PYTHON}_MISSING}")
    return()
  endif()
  list(TRANSFORM arg_OUTS PREPEND ${CMAKE_CURRENT_BINARY_DIR}/ OUTPUT_VARIABLE outs)
  set(cache ${CMAKE_CURRENT_BINARY_DIR}/${name}.cache)
  add_custom_command(
    OUTPUT ${outs}
    COMMAND ${CMAKE_COMMAND} -E rm -rf ${cache}
    COMMAND ${CMAKE_COMMAND} -E env TORCHINDUCTOR_CACHE_DIR=${cache} ${TD_PYTHON_${arg_PYTHON}}
            ${CMAKE_CURRENT_SOURCE_DIR}/${arg_SCRIPT} ${CMAKE_CURRENT_BINARY_DIR}/${arg_OUT_DIR}
    DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/${arg_SCRIPT}
    COMMENT "Running ${arg_SCRIPT} into ${arg_OUT_DIR}/"
    VERBATIM)
  add_custom_target(tensordict_${name} DEPENDS ${outs})
endfunction()

# A test runs in the source root, as Bazel runs it in its runfiles tree, so the data files its
# BUILD rule lists are found at the same relative paths; one that reads GENERATED files (the
# stems of td_cmake_python_genrule targets) runs in the build tree, where they lie at the paths
# Bazel gives them, or, where a genrule is not defined, is registered as skipped with the
# reason. $TEST_TMPDIR is a folder of its own in the build tree. The labels are Bazel's tags that
# CI selects on (multihost, slow, exclusive).
function(td_cmake_test name)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "TIMEOUT" "${_td_lists};ARGS;GENERATED;ENV;LABELS")
  if(NOT TENSORDICT_BUILD_TESTS)
    return()
  endif()
  add_executable(tensordict_${name} ${arg_SRCS})
  _td_setup(tensordict_${name} PUBLIC DEPS ${arg_DEPS} EXTERNAL ${arg_EXTERNAL}
            COPTS ${arg_COPTS} LINKOPTS ${arg_LINKOPTS})
  set(workdir ${PROJECT_SOURCE_DIR})
  foreach(generated IN LISTS arg_GENERATED)
    if(NOT TARGET tensordict_${generated})
      get_property(why GLOBAL PROPERTY TD_GENRULE_MISSING_${generated})
      message(STATUS "tensordict: test ${name} is skipped: ${why}")
      add_test(NAME ${name} COMMAND ${CMAKE_COMMAND} -E echo "skipped: ${why}")
      set_tests_properties(${name} PROPERTIES SKIP_REGULAR_EXPRESSION "^skipped: ")
      return()
    endif()
    add_dependencies(tensordict_${name} tensordict_${generated})
    set(workdir ${PROJECT_BINARY_DIR})
  endforeach()
  set(tmp ${CMAKE_CURRENT_BINARY_DIR}/${name}.tmp)
  file(MAKE_DIRECTORY ${tmp})
  add_test(NAME ${name} COMMAND tensordict_${name} ${arg_ARGS} WORKING_DIRECTORY ${workdir})
  set_tests_properties(${name} PROPERTIES TIMEOUT ${arg_TIMEOUT}
                       ENVIRONMENT "TEST_TMPDIR=${tmp};${arg_ENV}")
  if(arg_LABELS)
    set_tests_properties(${name} PROPERTIES LABELS "${arg_LABELS}")
  endif()
  if("exclusive" IN_LIST arg_LABELS)
    set_tests_properties(${name} PROPERTIES RUN_SERIAL TRUE)
  endif()
endfunction()
