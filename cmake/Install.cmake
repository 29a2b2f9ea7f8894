# `cmake --install BUILD --prefix PREFIX` (docs/design.md, Installing): the
# tools, the runtime an application links, the headers both the application
# and the generated model sources include, a CMake package (find_package(ampc)
# → ampc::runtime) and a pkg-config file. The prefix is relocatable: the
# tools find the headers and the cuda-sim library beside their own folder,
# ampc.pc names its folders relative to itself.
include(CMakePackageConfigHelpers)

set(AMPC_INSTALLED_TOOLS ampc ampc-opt ampc-translate ampc-train ampc-gradcheck
  ampc-conformance ampc-embed)
set_target_properties(${AMPC_INSTALLED_TOOLS} PROPERTIES
  INSTALL_RPATH "$ORIGIN/../lib")
install(TARGETS ${AMPC_INSTALLED_TOOLS} RUNTIME DESTINATION bin)
install(TARGETS ampc_runtime EXPORT ampcTargets
  LIBRARY DESTINATION lib
  INCLUDES DESTINATION include)
if(AMPC_HAVE_CUDA)
  install(TARGETS ampc_cudasim LIBRARY DESTINATION lib)
endif()
# The C API and model ABI (Runtime), the kernel headers generated sources
# include (Kernels) and the CUDA execution's headers cuda-sim sources include
# (CudaSim).
install(DIRECTORY include/ampc/Runtime include/ampc/Kernels include/ampc/CudaSim
  DESTINATION include/ampc
  FILES_MATCHING PATTERN "*.h" PATTERN "*.cuh")

install(EXPORT ampcTargets NAMESPACE ampc:: DESTINATION lib/cmake/ampc)
file(WRITE ${PROJECT_BINARY_DIR}/ampcConfig.cmake
  "include(\${CMAKE_CURRENT_LIST_DIR}/ampcTargets.cmake)\n")
write_basic_package_version_file(${PROJECT_BINARY_DIR}/ampcConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/ampcConfig.cmake
  ${PROJECT_BINARY_DIR}/ampcConfigVersion.cmake DESTINATION lib/cmake/ampc)

configure_file(cmake/ampc.pc.in ${PROJECT_BINARY_DIR}/ampc.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/ampc.pc DESTINATION lib/pkgconfig)
