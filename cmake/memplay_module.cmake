# memplay_module(TARGET PREFIX SOURCES... [DEPS targets...])
#
# One folder, one concern, one static library. Its headers are reached as "PREFIX/name.h" by
# the folder itself and by the targets that link it, and by no other: the build gives each
# library an include folder of its own holding a single entry, PREFIX, that points at the
# source folder, and that include folder travels only along target_link_libraries. So the DEPS
# list is the set of folders this one may use, and an include that goes the wrong way fails to
# compile. A folder may only use folders defined before it (replay/CMakeLists.txt lists them
# lowest first), so the arrows cannot form a cycle. (Quoted includes are also searched beside the including file: a source includes its
# own folder's headers by bare name, and never climbs out with "../"; tests/layout.sh checks.)
function(memplay_module target prefix)
  cmake_parse_arguments(M "" "" "SOURCES;DEPS" ${ARGN})
  foreach(dep IN LISTS M_DEPS)
    if(dep MATCHES "^memplay_" AND NOT TARGET ${dep})
      message(FATAL_ERROR "${target} uses ${dep}, which is not below it: a folder may only use the folders "
                          "defined before it (replay/CMakeLists.txt, docs/architecture.md)")
    endif()
  endforeach()
  add_library(${target} STATIC ${M_SOURCES})
  target_compile_options(${target} PRIVATE ${MEMPLAY_C_FLAGS})
  set(inc ${CMAKE_BINARY_DIR}/include/${target})
  file(MAKE_DIRECTORY ${inc})
  file(CREATE_LINK ${CMAKE_CURRENT_SOURCE_DIR} ${inc}/${prefix} SYMBOLIC)
  target_include_directories(${target} PUBLIC ${inc})
  if(M_DEPS)
    target_link_libraries(${target} PUBLIC ${M_DEPS})
  endif()
endfunction()
