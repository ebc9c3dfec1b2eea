# libtightfit.so: every layer's static library in one shared library (for Python's ctypes and for
# programs built against an installed tightfit), exporting exactly the functions and data the public
# headers declare (the version script cmake/export_list.cmake writes from include/tightfit/*.h).
# The static layer libraries stay what the tools and tests link, so the layering checks
# (scripts/check-layers, scripts/check-links) read the same per-layer archives as before.
include(GNUInstallDirs)

# Every tf_add_layer library, and those the layers' folders define themselves.
get_property(tf_shared_layers GLOBAL PROPERTY TF_LAYER_LIBRARIES)
# (Not the CUDA kernels: the CUDA backend is a module of its own, libtightfit_cuda.so,
# backends/cuda/CMakeLists.txt, so libtightfit.so needs no CUDA library.)
foreach(other tightfit_schema tightfit_cpu_kernels tightfit_vulkan_shaders tightfit_models tightfit_tools)
  if(TARGET ${other})
    list(APPEND tf_shared_layers ${other})
  endif()
endforeach()
set(tf_whole_archives)
foreach(layer ${tf_shared_layers})
  list(APPEND tf_whole_archives $<TARGET_FILE:${layer}>)
endforeach()

# No code of its own: the archives, linked whole (every object, not only those another object
# needs), are the library. The layer targets follow, for the system libraries they link (BLAS,
# OpenMP, FlatBuffers, Vulkan's loader, CUDA); their archives add nothing a second time.
file(GLOB tf_public_headers CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/include/tightfit/*.h)
set(tf_export_map ${PROJECT_BINARY_DIR}/tightfit.map)
add_custom_command(
  OUTPUT ${tf_export_map}
  COMMAND ${CMAKE_COMMAND} -DTF_HEADERS_DIR=${PROJECT_SOURCE_DIR}/include/tightfit -DTF_OUTPUT=${tf_export_map}
          -P ${PROJECT_SOURCE_DIR}/cmake/export_list.cmake
  DEPENDS ${tf_public_headers} ${PROJECT_SOURCE_DIR}/cmake/export_list.cmake
  COMMENT "Listing the public API libtightfit.so exports"
  VERBATIM)
add_custom_target(tightfit_export_map DEPENDS ${tf_export_map})
add_library(tightfit_shared SHARED ${PROJECT_SOURCE_DIR}/cmake/shared_library.c)
add_dependencies(tightfit_shared tightfit_export_map)
add_dependencies(tightfit_shared ${tf_shared_layers})
if(TARGET tightfit_cuda)
  add_dependencies(tightfit_shared tightfit_cuda) # what it loads for a CUDA device
endif()
set_target_properties(tightfit_shared PROPERTIES OUTPUT_NAME tightfit VERSION ${PROJECT_VERSION}
                      SOVERSION ${PROJECT_VERSION_MAJOR} LINKER_LANGUAGE CXX
                      LINK_DEPENDS ${tf_export_map})
target_link_options(tightfit_shared PRIVATE -Wl,--version-script=${tf_export_map})
if(NOT TIGHTFIT_SANITIZE)
  # Every symbol resolved at link time (clang's sanitizer runtimes are only found at load time).
  target_link_options(tightfit_shared PRIVATE -Wl,--no-undefined)
endif()
target_link_libraries(tightfit_shared PRIVATE -Wl,--whole-archive ${tf_whole_archives} -Wl,--no-whole-archive
                      ${tf_shared_layers})

# ---- install: the CLI, the shared library, the public headers, tightfit.pc ----
install(TARGETS tightfit_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS tightfit_shared LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/tightfit DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.h")
# tightfit/types.h includes "core/op_table.h" (the op table is data both sides of the API read); a
# quoted include looks beside the including header first, so it goes to include/tightfit/core/.
install(FILES ${PROJECT_SOURCE_DIR}/core/op_table.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/tightfit/core)
# The .pc names its prefix relative to where it lies (${pcfiledir}), so `cmake --install build
# --prefix P` works for any P chosen at install time.
set(tf_pc_up "")
string(REPLACE "/" ";" tf_pc_parts "${CMAKE_INSTALL_LIBDIR}/pkgconfig")
foreach(part ${tf_pc_parts})
  string(APPEND tf_pc_up "/..")
endforeach()
configure_file(${PROJECT_SOURCE_DIR}/cmake/tightfit.pc.in ${PROJECT_BINARY_DIR}/tightfit.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/tightfit.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
# The Python package: on the path of Debian's python3 for the /usr prefix; for another prefix,
# PYTHONPATH=<prefix>/lib/python3/dist-packages. It finds <prefix>/<libdir>/libtightfit.so itself.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/python/tightfit DESTINATION lib/python3/dist-packages
        FILES_MATCHING PATTERN "*.py" PATTERN "__pycache__" EXCLUDE)
