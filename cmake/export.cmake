# The libraries a program can build on, installed with their headers and a CMake package:
#   find_package(symmesh CONFIG REQUIRED)
#   target_link_libraries(app PRIVATE symmesh::runtime)   # or symmesh::ops, symmesh::transport
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
