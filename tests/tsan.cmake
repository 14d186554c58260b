# The ThreadSanitizer build (RDMAKIT_SANITIZE=thread, scripts/test.sh's build-tsan): the
# unit tests, and the cases of the servers that run threads or serve clients at once, in the
# guest with the plain and ASan passes (label tsan). It builds only the programs these run
# (scripts/test.sh names them), so nothing else is registered here.
#
# halt_on_error: a report ends the process with exitcode 66, which every case checks; the
# cases also look for a report in what each process printed (tsan_cases.sh).
set(tsan_options "halt_on_error=1:second_deadlock_stack=1")
gtest_discover_tests(unit_tests TEST_PREFIX "gtest." PROPERTIES LABELS unit ENVIRONMENT "TSAN_OPTIONS=${tsan_options}")

set(report_queue ${PROJECT_BINARY_DIR}/integration-reports)
foreach(step IN ITEMS reports_queue_emptied reports_match_schemas)
  add_test(NAME reports.${step} COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/run-case.sh ${step}
                                        ${PROJECT_BINARY_DIR}/bin ${PROJECT_BINARY_DIR}/tests/bin)
  set_tests_properties(reports.${step} PROPERTIES ENVIRONMENT RDMAKIT_REPORT_QUEUE=${report_queue} TIMEOUT 400)
endforeach()
set_tests_properties(reports.reports_queue_emptied PROPERTIES FIXTURES_SETUP reports)
set_tests_properties(reports.reports_match_schemas PROPERTIES FIXTURES_CLEANUP reports)

# Each case has its own block of 100 ports, above those of tests/CMakeLists.txt's cases and
# below the kernel's ephemeral range (32768), where the TCP side channels listen too.
set(port_base 30000)
include(${CMAKE_CURRENT_SOURCE_DIR}/cases.cmake)
rdmakit_read_cases()
foreach(case IN LISTS rdmakit_cases_tsan)
  math(EXPR port_base "${port_base} + 100")
  add_test(NAME tsan.${case} COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/run-case.sh ${case}
                                     ${PROJECT_BINARY_DIR}/bin ${PROJECT_BINARY_DIR}/tests/bin)
  set_tests_properties(tsan.${case} PROPERTIES
    LABELS tsan SKIP_RETURN_CODE 77 TIMEOUT 400 FIXTURES_REQUIRED reports
    ENVIRONMENT "RDMAKIT_PORT_BASE=${port_base};RDMAKIT_REPORT_QUEUE=${report_queue};TSAN_OPTIONS=${tsan_options}")
endforeach()
