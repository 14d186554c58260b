# What the install and the Debian package hold beyond the tools (apps/CMakeLists.txt installs
# each tool with its man page and completion), and the CPack settings for the .deb.
# scripts/package.sh builds and checks the package.

rdmakit_install_man_page(${PROJECT_SOURCE_DIR}/man/rdmakit.7 rdmakit 7)

# /usr/share/doc/<package>/copyright, machine-readable (DEP-5), made from LICENSE: the holder
# from its "Copyright (c)" line, the text from "Permission" on, each line indented by one
# blank and blank lines written " .", as a DEP-5 field continues.
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/LICENSE)
file(READ ${PROJECT_SOURCE_DIR}/LICENSE license)
if(NOT license MATCHES "Copyright \\(c\\) ([^\n]+)\n")
  message(FATAL_ERROR "LICENSE has no 'Copyright (c) YEAR HOLDER' line")
endif()
set(RDMAKIT_COPYRIGHT ${CMAKE_MATCH_1})
string(FIND "${license}" "Permission is hereby granted" start)
if(start EQUAL -1)
  message(FATAL_ERROR "LICENSE does not hold the MIT (Expat) permission text this package describes")
endif()
string(SUBSTRING "${license}" ${start} -1 license)
string(STRIP "${license}" license)
string(REGEX REPLACE "\n\n" "\n.\n" license "${license}")
string(REGEX REPLACE "\n\n" "\n.\n" license "${license}")  # again, for runs of blank lines
string(REPLACE "\n" "\n " RDMAKIT_LICENSE_TEXT " ${license}")
configure_file(${PROJECT_SOURCE_DIR}/cmake/copyright.in ${PROJECT_BINARY_DIR}/copyright @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/copyright DESTINATION ${CMAKE_INSTALL_DOCDIR})

# The JSON report schemas; CONFIGURE_DEPENDS so that a schema added later is picked up by the
# next build without a manual re-configure.
file(GLOB RDMAKIT_SCHEMAS CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/doc/schema/*.json)
if(RDMAKIT_SCHEMAS)
  install(FILES ${RDMAKIT_SCHEMAS} DESTINATION ${CMAKE_INSTALL_DOCDIR}/schema)
endif()

# rdmakit-rxe-vm: scripts/rxe-vm.sh as a program, for runners whose kernel has no RDMA. A
# package of its own, so that the tools' package does not pull in qemu and a kernel image.
install(PROGRAMS ${PROJECT_SOURCE_DIR}/scripts/rxe-vm.sh DESTINATION ${CMAKE_INSTALL_BINDIR} RENAME rdmakit-rxe-vm
        COMPONENT rxe_vm)
rdmakit_install_man_page(${PROJECT_SOURCE_DIR}/man/rdmakit-rxe-vm.1 rdmakit-rxe-vm 1 rxe_vm)
install(FILES ${PROJECT_BINARY_DIR}/copyright DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/rdmakit-rxe-vm
        COMPONENT rxe_vm)

# The diag-connect agent's systemd unit (dist/systemd), with the packaged program's path in
# ExecStart: the package's, under /usr (CPack's default for a .deb, said here because the
# unit depends on it), whatever CMAKE_INSTALL_PREFIX a plain install uses. Installed, not
# enabled: no maintainer script enables or starts it.
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(RDMAKIT_AGENT_PROGRAM ${RDMAKIT_PROGRAM_PREFIX}diag-connect)
set(RDMAKIT_AGENT_PATH ${CPACK_PACKAGING_INSTALL_PREFIX}/${CMAKE_INSTALL_BINDIR}/${RDMAKIT_AGENT_PROGRAM})
configure_file(${PROJECT_SOURCE_DIR}/dist/systemd/rdmakit-diag-connect-agent.service.in
               ${PROJECT_BINARY_DIR}/rdmakit-diag-connect-agent.service @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/rdmakit-diag-connect-agent.service DESTINATION lib/systemd/system)
# rdma_pingmesh's, the same way (off until enabled).
set(RDMAKIT_PINGMESH_PROGRAM ${RDMAKIT_PROGRAM_PREFIX}rdma_pingmesh)
set(RDMAKIT_PINGMESH_PATH ${CPACK_PACKAGING_INSTALL_PREFIX}/${CMAKE_INSTALL_BINDIR}/${RDMAKIT_PINGMESH_PROGRAM})
configure_file(${PROJECT_SOURCE_DIR}/dist/systemd/rdmakit-rdma_pingmesh.service.in
               ${PROJECT_BINARY_DIR}/rdmakit-rdma_pingmesh.service @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/rdmakit-rdma_pingmesh.service DESTINATION lib/systemd/system)

set(CPACK_GENERATOR DEB)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL tools rxe_vm)
set(CPACK_DEBIAN_TOOLS_PACKAGE_NAME rdmakit)
set(CPACK_DEBIAN_RXE_VM_PACKAGE_NAME rdmakit-rxe-vm)
set(CPACK_PACKAGE_NAME rdmakit)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "rdmakit developers")
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "rdmakit developers")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "RDMA diagnostics and test tools with JSON reports")
string(CONCAT CPACK_PACKAGE_DESCRIPTION
  "rping, udaddy, ucmatose, mckey, rdma_server and rdma_client speak the wire protocols of\n"
  "the rdmacm-utils tools of the same names and interoperate with them; send_bw measures\n"
  "bandwidth and latency like perftest; diag-bind explains why an RDMA address bind or\n"
  "resolution fails, and diag-connect why two hosts cannot talk over rdma_cm. All share one\n"
  "command line, JSON reports, latency statistics and error messages that name the failing\n"
  "call.")
if(RDMAKIT_PROGRAM_PREFIX)
  string(APPEND CPACK_PACKAGE_DESCRIPTION
    "\nPrograms are installed as ${RDMAKIT_PROGRAM_PREFIX}<tool>, so the package can sit beside rdmacm-utils.")
endif()
set(CPACK_DEBIAN_TOOLS_DESCRIPTION "${CPACK_PACKAGE_DESCRIPTION_SUMMARY}\n${CPACK_PACKAGE_DESCRIPTION}")
string(CONCAT CPACK_DEBIAN_RXE_VM_DESCRIPTION
  "soft-RoCE (rxe) test VM for hosts whose kernel has no RDMA\n"
  "rdmakit-rxe-vm boots the installed Debian kernel under qemu (TCG, no KVM needed) with the\n"
  "host's root shared read-only and the current folder writable, creates an rxe device\n"
  "and runs one command there, such as rdmakit-rdma_smoke --junit report.xml, returning its\n"
  "exit status. For CI runners in containers or microVMs.")
set(CPACK_DEBIAN_RXE_VM_PACKAGE_DEPENDS
    "qemu-system-x86, linux-image-amd64, busybox-static, kmod, cpio, iproute2, rdma-core, file")
set(CPACK_DEBIAN_RXE_VM_PACKAGE_SHLIBDEPS OFF)
set(CPACK_DEBIAN_RXE_VM_PACKAGE_RECOMMENDS rdmakit)
set(CPACK_DEBIAN_RXE_VM_PACKAGE_SUGGESTS "")
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # rdmakit_<version>_<arch>.deb
# Depends comes from dpkg-shlibdeps on the installed programs (on Debian 12: libibverbs1,
# librdmacm1, libspdlog1.10-fmt9, libfmt9, libssl3 (libcrypto, for the side channels' key
# handshake), libcap2 (the agent's capability drop), libstdc++6, libgcc-s1, libc6), so it
# follows whatever the build linked.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# The tools run without it, but the udev rules, modules setup and rdma(8) that make a device
# usable come from rdma-core.
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS rdma-core)
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "rdmacm-utils, perftest")
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
# Shipped stripped, as Debian expects; the build tree keeps the symbols.
set(CPACK_STRIP_FILES ON)

include(CPack)
