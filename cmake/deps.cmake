# Third-party libraries. All are header-only or found as system packages (Debian/Ubuntu -dev
# packages; scripts/install-deps.sh installs them). Where a CMake package config is missing
# (as on the GPU machine for some), fall back to the headers alone.
find_package(Threads REQUIRED)

function(dsa_header_only_fallback target header)
  if(NOT TARGET ${target})
    find_path(_inc ${header} REQUIRED)
    add_library(${target} INTERFACE IMPORTED GLOBAL)
    target_include_directories(${target} INTERFACE ${_inc})
    unset(_inc CACHE)
  endif()
endfunction()

find_package(nlohmann_json 3 QUIET)
dsa_header_only_fallback(nlohmann_json::nlohmann_json nlohmann/json.hpp)

# PCRE2 (8-bit, UTF + JIT) for the tokenizer's split regexes; optional: without it the tokenizer
# sources still build and Tokenizer::load() throws "built without PCRE2".
find_package(PkgConfig QUIET)
if(PKG_CONFIG_FOUND)
  pkg_check_modules(PCRE2 QUIET IMPORTED_TARGET GLOBAL libpcre2-8)
endif()
message(STATUS "dsa tokenizer: PCRE2 ${PCRE2_FOUND} ${PCRE2_VERSION}")

find_package(CLI11 QUIET)
dsa_header_only_fallback(CLI11::CLI11 CLI/CLI.hpp)

# fmt is used header-only: no link-time dependence on a particular libfmt build.
find_package(fmt QUIET)
if(TARGET fmt::fmt-header-only)
  add_library(dsa_fmt INTERFACE)
  target_link_libraries(dsa_fmt INTERFACE fmt::fmt-header-only)
else()
  find_path(FMT_INCLUDE fmt/format.h REQUIRED)
  add_library(dsa_fmt INTERFACE)
  target_include_directories(dsa_fmt INTERFACE ${FMT_INCLUDE})
  target_compile_definitions(dsa_fmt INTERFACE FMT_HEADER_ONLY=1)
endif()

# cpp-httplib (header-only, Debian libcpp-httplib-dev) for the HTTP server (src/dsa/server,
# `dsa serve`); optional: without it the server, its command and its tests are left out.
# Debian's package splits it: declarations in httplib.h, the code in libcpp-httplib.so (linked
# when present; the upstream single header needs no library).
option(DSA_SERVER "Build the HTTP server when cpp-httplib is found" ON)
find_path(HTTPLIB_INCLUDE httplib.h)
find_library(HTTPLIB_LIBRARY cpp-httplib)
if(DSA_SERVER AND HTTPLIB_INCLUDE)
  set(DSA_WITH_SERVER ON)
else()
  set(DSA_WITH_SERVER OFF)
  message(STATUS "dsa: building without the HTTP server (DSA_SERVER=${DSA_SERVER}; httplib.h from libcpp-httplib-dev: ${HTTPLIB_INCLUDE})")
endif()

if(DSA_BUILD_TESTS)
  find_package(GTest QUIET)
  if(NOT TARGET GTest::gtest_main)
    if(EXISTS /usr/src/googletest/CMakeLists.txt)
      set(INSTALL_GTEST OFF CACHE BOOL "" FORCE)
      add_subdirectory(/usr/src/googletest ${CMAKE_BINARY_DIR}/_googletest EXCLUDE_FROM_ALL)
      if(NOT TARGET GTest::gtest_main)
        add_library(GTest::gtest_main ALIAS gtest_main)
        add_library(GTest::gtest ALIAS gtest)
      endif()
    else()
      message(FATAL_ERROR "GoogleTest not found (install libgtest-dev or googletest)")
    endif()
  endif()
  include(GoogleTest)
endif()

