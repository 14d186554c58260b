# The integration cases and their labels, read from the case files themselves: each case is a
# function case_NAME in tests/integration/*_cases.sh, with a line "# ctest: KIND TRAIT..." right
# above it. A case function without that line stops the configure step, so that no case is
# dropped by a rename, and a case's labels change where the case is read.
#
# KIND       integration (on a device, in the guest), nodevice (on the build host), pair (two
#            guests), soak, valgrind, tsan (build-tsan only)
# TRAITS     quick           in the inner loop (scripts/test.sh --quick)
#            sanitized       the full suite runs it in the ASan build; the plain copy gets the
#                            label integration_also_sanitized (RDMAKIT_LONG=1 and --quick run it)
#            sanitized_only  only in the ASan build (the plain build meets it across the wire)
#            long            left out of the full suite (integration_long, pair_long)
#            alone           runs by itself (RUN_SERIAL): it breaks and repairs the host, or
#                            measures what other cases would disturb
#            port_7174       shares the one port the stock udaddy listens on
#            skip_77         77 is a skip (device-free, but only where there is no device)
#            not_sanitized   its sanitized copy is left out of the suite (nodevice_long)
#            timeout=N       seconds, instead of its kind's (not nodevice: the device-free
#                            cases share RDMAKIT_DEVICE_FREE_TIMEOUT, tests/CMakeLists.txt)
#
# Sets rdmakit_cases_<KIND> (the names, in the files' order) and rdmakit_case_<NAME> (its
# traits) in the caller's scope.
function(rdmakit_read_cases)
  file(GLOB case_files ${CMAKE_CURRENT_SOURCE_DIR}/integration/*_cases.sh)
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${case_files})
  set(kinds integration nodevice pair soak valgrind tsan)
  set(known quick sanitized sanitized_only long alone port_7174 skip_77 not_sanitized)
  foreach(kind IN LISTS kinds)
    set(cases_${kind})
  endforeach()
  foreach(case_file IN LISTS case_files)
    file(STRINGS ${case_file} lines REGEX "^(# ctest:|case_[a-z0-9_]+\\(\\) *\\{)")
    set(pending)
    foreach(line IN LISTS lines)
      if(line MATCHES "^# ctest: *(.*)$")
        if(pending)
          message(FATAL_ERROR "${case_file}: '# ctest: ${pending}' is followed by another before its case")
        endif()
        set(pending "${CMAKE_MATCH_1}")
      elseif(line MATCHES "^case_([a-z0-9_]+)\\(")
        set(name ${CMAKE_MATCH_1})
        if(NOT pending)
          message(FATAL_ERROR "${case_file}: case_${name} has no '# ctest: KIND ...' line above it (tests/cases.cmake)")
        endif()
        string(REPLACE " " ";" words "${pending}")
        list(POP_FRONT words kind)
        if(NOT kind IN_LIST kinds)
          message(FATAL_ERROR "${case_file}: case_${name}: '${kind}' is no kind of case (tests/cases.cmake)")
        endif()
        foreach(trait IN LISTS words)
          if(NOT trait IN_LIST known AND NOT trait MATCHES "^timeout=[0-9]+$")
            message(FATAL_ERROR "${case_file}: case_${name}: '${trait}' is no trait of a case (tests/cases.cmake)")
          endif()
        endforeach()
        list(APPEND cases_${kind} ${name})
        set(rdmakit_case_${name} "${words}" PARENT_SCOPE)
        set(pending)
      endif()
    endforeach()
    if(pending)
      message(FATAL_ERROR "${case_file}: '# ctest: ${pending}' stands above no case")
    endif()
  endforeach()
  foreach(kind IN LISTS kinds)
    set(rdmakit_cases_${kind} ${cases_${kind}} PARENT_SCOPE)
  endforeach()
endfunction()

# rdmakit_case_timeout(NAME DEFAULT OUT): the case's timeout=N, else DEFAULT.
function(rdmakit_case_timeout name default out)
  set(timeout ${default})
  foreach(trait IN LISTS rdmakit_case_${name})
    if(trait MATCHES "^timeout=([0-9]+)$")
      set(timeout ${CMAKE_MATCH_1})
    endif()
  endforeach()
  set(${out} ${timeout} PARENT_SCOPE)
endfunction()
