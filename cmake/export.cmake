# The libraries a program can build on, installed with their headers, a CMake package and a
# pkg-config file:
#   find_package(symmesh CONFIG REQUIRED)
#   target_link_libraries(app PRIVATE symmesh::symmesh)   # libsymmesh: attach as a PE
#   target_link_libraries(app PRIVATE symmesh::runtime)   # or symmesh::ops, symmesh::transport
#   c++ app.cpp $(pkg-config --cflags --libs symmesh)     # libsymmesh, without CMake
# Headers install under include/symmesh and are included by layer: "runtime/pe.h".
include(CMakePackageConfigHelpers)
set(SYMMESH_EXPORTED_LAYERS common wire transport api runtime ops)
foreach(layer IN LISTS SYMMESH_EXPORTED_LAYERS)
  set_target_properties(symmesh_${layer} PROPERTIES EXPORT_NAME ${layer})
  target_compile_features(symmesh_${layer} PUBLIC cxx_std_20)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${layer}/ DESTINATION include/symmesh/${layer}
          FILES_MATCHING PATTERN "*.h")
  install(TARGETS symmesh_${layer} EXPORT symmeshTargets ARCHIVE DESTINATION lib
          INCLUDES DESTINATION include/symmesh)
endforeach()
install(DIRECTORY ${PROJECT_BINARY_DIR}/include/wire-generated/wire/ DESTINATION include/symmesh/wire
        FILES_MATCHING PATTERN "*.pb.h")
install(EXPORT symmeshTargets NAMESPACE symmesh:: DESTINATION lib/cmake/symmesh)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/symmeshConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/symmeshConfig.cmake
                              INSTALL_DESTINATION lib/cmake/symmesh)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/symmeshConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/symmeshConfig.cmake
              ${PROJECT_BINARY_DIR}/symmeshConfigVersion.cmake
        DESTINATION lib/cmake/symmesh)

# symmesh::symmesh is libsymmesh: the api layer and the layers under it.
add_library(symmesh_symmesh INTERFACE)
target_link_libraries(symmesh_symmesh INTERFACE symmesh_api)
set_target_properties(symmesh_symmesh PROPERTIES EXPORT_NAME symmesh)
install(TARGETS symmesh_symmesh EXPORT symmeshTargets)
set(SYMMESH_PC_VERBS "")
if(SYMMESH_VERBS)
  set(SYMMESH_PC_VERBS libibverbs)
endif()
get_target_property(transport_definitions symmesh_transport INTERFACE_COMPILE_DEFINITIONS)
list(TRANSFORM transport_definitions PREPEND -D)
list(JOIN transport_definitions " " SYMMESH_PC_DEFINES)
configure_file(${PROJECT_SOURCE_DIR}/cmake/symmesh.pc.in ${PROJECT_BINARY_DIR}/symmesh.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/symmesh.pc DESTINATION lib/pkgconfig)
