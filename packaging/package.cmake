# CPack: Debian packages from the install rules (cpack -G DEB in the build
# folder; scripts/package-deb.sh configures a build for it).
#   kolo      runtime: libkolo.so.<major>.<minor>, kolorun, kolo-coordinator,
#             kolo-ctl (and kolo-bench when built), the Python package for
#             Debian's /usr/bin/python3
#   kolo-dev  headers, libkolo.so, the CMake package, kolo.pc
# Depends come from dpkg-shlibdeps; shlibs and the ldconfig trigger are
# generated. Each package carries the Debian copyright and changelog files.
set(CPACK_PACKAGE_NAME kolo)
set(CPACK_PACKAGE_VENDOR "kolo developers")
set(CPACK_PACKAGE_CONTACT "kolo developers <kolo-dev@kolo.invalid>")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "Horovod-style collective communication with elastic membership")
set(CPACK_PACKAGE_DESCRIPTION
"kolo runs allreduce, allgather, broadcast, alltoall and reducescatter for
data-parallel training: a coordinator negotiates which tensors every rank is
ready to reduce and fuses them; workers move the data over TCP rings, shared
memory within a host, or NCCL. Workers may fail or join while the others go
on (elastic jobs), and faults can be injected on purpose.")
set(CPACK_RESOURCE_FILE_LICENSE ${PROJECT_SOURCE_DIR}/LICENSE)
set(CPACK_STRIP_FILES ON)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)

set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL runtime dev)
if(KOLO_HAVE_C10D)
  list(APPEND CPACK_COMPONENTS_ALL torch)
endif()
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_MAINTAINER ${CPACK_PACKAGE_CONTACT})
set(CPACK_DEBIAN_PACKAGE_HOMEPAGE "")
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY ">=")

set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME kolo)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SECTION net)
# CPack puts CPACK_PACKAGE_DESCRIPTION_SUMMARY first (the synopsis).
set(CPACK_DEBIAN_RUNTIME_DESCRIPTION
"${CPACK_PACKAGE_DESCRIPTION}
.
This package has the library, the launcher kolorun, kolo-coordinator,
kolo-ctl and the Python package kolo (import kolo.torch as hvd).")
# The Python extension is built for this Python minor version.
find_package(Python3 QUIET COMPONENTS Interpreter)
if(KOLO_HAVE_PYTHON AND Python3_FOUND)
  set(_python_depends
      "python3 (>= ${Python3_VERSION_MAJOR}.${Python3_VERSION_MINOR}), python3 (<< ${Python3_VERSION_MAJOR}.${Python3_VERSION_MINOR}.255)")
  set(CPACK_DEBIAN_RUNTIME_PACKAGE_DEPENDS "${_python_depends}")
  set(CPACK_DEBIAN_RUNTIME_PACKAGE_SUGGESTS "python3-torch, python3-numpy, python3-cloudpickle")
endif()

# Byte-compiled Python files are made at install and removed at removal;
# the library cache is refreshed by dpkg's ldconfig trigger (our own
# postinst and postrm keep CPack from writing ones that call ldconfig).
foreach(script IN ITEMS postinst prerm postrm triggers)
  configure_file(${CMAKE_CURRENT_SOURCE_DIR}/debian-${script}
                 ${CMAKE_CURRENT_BINARY_DIR}/deb-runtime/${script} COPYONLY)
  list(APPEND CPACK_DEBIAN_RUNTIME_PACKAGE_CONTROL_EXTRA
       ${CMAKE_CURRENT_BINARY_DIR}/deb-runtime/${script})
endforeach()
set(CPACK_DEBIAN_RUNTIME_PACKAGE_CONTROL_STRICT_PERMISSION ON)

set(CPACK_DEBIAN_DEV_PACKAGE_NAME kolo-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "kolo (= ${PROJECT_VERSION}), libabsl-dev")
set(CPACK_DEBIAN_DEV_DESCRIPTION
"${CPACK_PACKAGE_DESCRIPTION}
.
This package has the C++ headers, the CMake package (find_package(kolo))
and the pkg-config file for building programs with kolo.")

# kolo-torch: kolo._kolo_c10d, the torch.distributed backend, built where
# Torch's C++ package is (libtorch-dev). It links the system's libtorch of
# that version (dpkg-shlibdeps finds libtorch1.13) and needs torch's Python
# package of the same version.
if(KOLO_HAVE_C10D)
  string(REGEX MATCH "^([0-9]+)\\.([0-9]+)" _torch_mm "${KOLO_C10D_TORCH_VERSION}")
  math(EXPR _torch_next_minor "${CMAKE_MATCH_2} + 1")
  set(_torch_mm_upper "${CMAKE_MATCH_1}.${_torch_next_minor}~")
  set(CPACK_DEBIAN_TORCH_PACKAGE_NAME kolo-torch)
  set(CPACK_DEBIAN_TORCH_PACKAGE_SECTION python)
  set(CPACK_DEBIAN_TORCH_PACKAGE_DEPENDS
      "kolo (= ${PROJECT_VERSION}), ${_python_depends}, python3-torch (>= ${_torch_mm}~), python3-torch (<< ${_torch_mm_upper})")
  set(CPACK_DEBIAN_TORCH_DESCRIPTION
"${CPACK_PACKAGE_DESCRIPTION}
.
This package has kolo's torch.distributed backend, built for torch
${_torch_mm}: import kolo.torch.distributed, then init_process_group
with the backend named kolo.")
endif()

# Debian's per-package documentation: copyright and changelog.
configure_file(${CMAKE_CURRENT_SOURCE_DIR}/debian-copyright.in
               ${CMAKE_CURRENT_BINARY_DIR}/copyright @ONLY)
configure_file(${CMAKE_CURRENT_SOURCE_DIR}/debian-changelog.in
               ${CMAKE_CURRENT_BINARY_DIR}/changelog.Debian @ONLY)
add_custom_command(
  OUTPUT ${CMAKE_CURRENT_BINARY_DIR}/changelog.Debian.gz
  COMMAND gzip -9 -n -c ${CMAKE_CURRENT_BINARY_DIR}/changelog.Debian
          > ${CMAKE_CURRENT_BINARY_DIR}/changelog.Debian.gz
  DEPENDS ${CMAKE_CURRENT_BINARY_DIR}/changelog.Debian
  COMMENT "packaging: changelog.Debian.gz" VERBATIM)
add_custom_target(kolo_debian_docs ALL DEPENDS ${CMAKE_CURRENT_BINARY_DIR}/changelog.Debian.gz)
foreach(component IN LISTS CPACK_COMPONENTS_ALL)
  if(component STREQUAL "runtime")
    set(_pkg kolo)
  else()
    set(_pkg kolo-${component})
  endif()
  # Only in the packages: a plain cmake --install leaves them out. The
  # version has no Debian revision (a native package): changelog.gz.
  install(FILES ${CMAKE_CURRENT_BINARY_DIR}/copyright
          DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/${_pkg}
          COMPONENT ${component} EXCLUDE_FROM_ALL)
  install(FILES ${CMAKE_CURRENT_BINARY_DIR}/changelog.Debian.gz
          DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/${_pkg}
          RENAME changelog.gz COMPONENT ${component} EXCLUDE_FROM_ALL)
endforeach()

include(CPack)
