# What the install and the Debian packages hold beyond the tools (apps/CMakeLists.txt installs
# each tool with its man page and completion, in its package's component), and the CPack
# settings for the .debs. scripts/package.sh builds and checks them.
#
# The packages follow what the programs link, as rdma-core splits its own:
#   rdmakit           the tools that measure (rping, udaddy, ucmatose, mckey, rdma_server,
#                     rdma_client, send_bw), rdmakit(7), the report schemas: librdmacm,
#                     libibverbs, spdlog and fmt only
#   rdmakit-diag      diag-bind and diag-connect (and the agent's unit): libnftables, libcap,
#                     libcrypto; what the tools' --diagnose runs, so rdmakit recommends it
#   rdmakit-smoke     rdma_smoke, which runs the tools and diag-bind: pugixml, libcrypto
#                     (--serve's keyed handshake), none of diag-connect's libnftables, libcap
#   rdmakit-pingmesh  rdma_pingmesh (and its unit): libmicrohttpd; a path gone bad is
#                     diagnosed by rdmakit-diag's diag-bind, which it recommends
#   rdmakit-mesh      rdma_mesh, where CMake found MPI: Open MPI (and none of rdmakit-diag's
#                     libraries: its ranks read the host as diag-bind does)
#   rdmakit-rxe-vm    the soft-RoCE VM runner: qemu and a kernel image

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
install(FILES ${PROJECT_BINARY_DIR}/copyright DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/rdmakit)
# Every package carries it, in its own folder (Debian policy).
set(RDMAKIT_PACKAGES diag smoke pingmesh)
if(TARGET rdmakit::mesh_mpi)
  list(APPEND RDMAKIT_PACKAGES mesh)
endif()
foreach(component IN LISTS RDMAKIT_PACKAGES)
  install(FILES ${PROJECT_BINARY_DIR}/copyright DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/rdmakit-${component}
          COMPONENT ${component})
endforeach()

# The JSON report schemas; CONFIGURE_DEPENDS so that a schema added later is picked up by the
# next build without a manual re-configure.
file(GLOB RDMAKIT_SCHEMAS CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/doc/schema/*.json)
if(RDMAKIT_SCHEMAS)
  install(FILES ${RDMAKIT_SCHEMAS} DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/rdmakit/schema)
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
install(FILES ${PROJECT_BINARY_DIR}/rdmakit-diag-connect-agent.service DESTINATION lib/systemd/system COMPONENT diag)
# rdma_pingmesh's, the same way (off until enabled).
set(RDMAKIT_PINGMESH_PROGRAM ${RDMAKIT_PROGRAM_PREFIX}rdma_pingmesh)
set(RDMAKIT_PINGMESH_PATH ${CPACK_PACKAGING_INSTALL_PREFIX}/${CMAKE_INSTALL_BINDIR}/${RDMAKIT_PINGMESH_PROGRAM})
configure_file(${PROJECT_SOURCE_DIR}/dist/systemd/rdmakit-rdma_pingmesh.service.in
               ${PROJECT_BINARY_DIR}/rdmakit-rdma_pingmesh.service @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/rdmakit-rdma_pingmesh.service DESTINATION lib/systemd/system COMPONENT pingmesh)

set(CPACK_GENERATOR DEB)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL tools ${RDMAKIT_PACKAGES} rxe_vm)
set(CPACK_PACKAGE_NAME rdmakit)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "rdmakit developers")
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "rdmakit developers")
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # <package>_<version>_<arch>.deb
# Depends comes from dpkg-shlibdeps on each package's programs (so it follows whatever they
# link), after the packages of ours each needs at this very version.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
# Shipped stripped, as Debian expects; the build tree keeps the symbols.
set(CPACK_STRIP_FILES ON)
set(same_version "(= ${PROJECT_VERSION})")
if(RDMAKIT_PROGRAM_PREFIX)
  set(prefix_note "\nPrograms are installed as ${RDMAKIT_PROGRAM_PREFIX}<tool>, so the package can sit beside rdmacm-utils.")
else()
  set(prefix_note "")
endif()
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "RDMA test tools with JSON reports")

set(CPACK_DEBIAN_TOOLS_PACKAGE_NAME rdmakit)
string(CONCAT CPACK_DEBIAN_TOOLS_DESCRIPTION
  "RDMA test tools with JSON reports\n"
  "rping, udaddy, ucmatose, mckey, rdma_server and rdma_client speak the wire protocols of\n"
  "the rdmacm-utils tools of the same names and interoperate with them; send_bw measures\n"
  "bandwidth and latency like perftest. All share one command line, JSON reports, latency\n"
  "statistics and error messages that name the failing call; --diagnose explains a failure\n"
  "with rdmakit-diag's diag-bind."
  "${prefix_note}")
# The tools run without it, but the udev rules, modules setup and rdma(8) that make a device
# usable come from rdma-core.
set(CPACK_DEBIAN_TOOLS_PACKAGE_RECOMMENDS "rdma-core, rdmakit-diag")
set(CPACK_DEBIAN_TOOLS_PACKAGE_SUGGESTS "rdmacm-utils, perftest, rdmakit-smoke")

set(CPACK_DEBIAN_DIAG_PACKAGE_NAME rdmakit-diag)
set(CPACK_DEBIAN_DIAG_PACKAGE_DEPENDS "rdmakit ${same_version}")
set(CPACK_DEBIAN_DIAG_PACKAGE_RECOMMENDS rdma-core)
string(CONCAT CPACK_DEBIAN_DIAG_DESCRIPTION
  "RDMA diagnosers: why a bind or a connection fails\n"
  "diag-bind explains why an RDMA address bind or resolution fails on this host, and\n"
  "diag-connect why two hosts cannot talk over rdma_cm (with an agent, diag-connect --serve,\n"
  "on the other host), each naming the cause and the command that fixes it."
  "${prefix_note}")

set(CPACK_DEBIAN_SMOKE_PACKAGE_NAME rdmakit-smoke)
set(CPACK_DEBIAN_SMOKE_PACKAGE_DEPENDS "rdmakit ${same_version}, rdmakit-diag ${same_version}")
string(CONCAT CPACK_DEBIAN_SMOKE_DESCRIPTION
  "RDMA smoke test for CI, with JUnit XML\n"
  "rdma_smoke runs diag-bind and each tool against itself on a host's RDMA addresses (or\n"
  "against a second host) and reports the outcome as a table, JSON and JUnit XML."
  "${prefix_note}")

set(CPACK_DEBIAN_PINGMESH_PACKAGE_NAME rdmakit-pingmesh)
set(CPACK_DEBIAN_PINGMESH_PACKAGE_DEPENDS "rdmakit ${same_version}")
set(CPACK_DEBIAN_PINGMESH_PACKAGE_RECOMMENDS rdmakit-diag)
set(CPACK_DEBIAN_PINGMESH_PACKAGE_SUGGESTS prometheus-node-exporter)
string(CONCAT CPACK_DEBIAN_PINGMESH_DESCRIPTION
  "Always-on RDMA path probes with OpenMetrics\n"
  "rdma_pingmesh probes every RDMA path to the hosts of a pinglist, all the time, and\n"
  "serves what it finds to Prometheus (/metrics, or node_exporter's textfile collector)."
  "${prefix_note}")

set(CPACK_DEBIAN_MESH_PACKAGE_NAME rdmakit-mesh)
set(CPACK_DEBIAN_MESH_PACKAGE_DEPENDS "rdmakit ${same_version}")
set(CPACK_DEBIAN_MESH_PACKAGE_RECOMMENDS openmpi-bin)
string(CONCAT CPACK_DEBIAN_MESH_DESCRIPTION
  "RDMA all-pairs test over MPI or Slurm\n"
  "rdma_mesh measures every pair of an MPI job's ranks (mpirun or srun) and names the node,\n"
  "NIC, link or switch behind the pairs that fall short."
  "${prefix_note}")

set(CPACK_DEBIAN_RXE_VM_PACKAGE_NAME rdmakit-rxe-vm)
string(CONCAT CPACK_DEBIAN_RXE_VM_DESCRIPTION
  "soft-RoCE (rxe) test VM for hosts whose kernel has no RDMA\n"
  "rdmakit-rxe-vm boots the installed Debian kernel under qemu (TCG, no KVM needed) with the\n"
  "host's root shared read-only and the current folder writable, creates an rxe device\n"
  "and runs one command there, such as rdmakit-rdma_smoke --junit report.xml, returning its\n"
  "exit status. For CI runners in containers or microVMs.")
set(CPACK_DEBIAN_RXE_VM_PACKAGE_DEPENDS
    "qemu-system-x86, linux-image-amd64, busybox-static, kmod, cpio, iproute2, rdma-core, file")
set(CPACK_DEBIAN_RXE_VM_PACKAGE_SHLIBDEPS OFF)
set(CPACK_DEBIAN_RXE_VM_PACKAGE_RECOMMENDS rdmakit-smoke)

include(CPack)
