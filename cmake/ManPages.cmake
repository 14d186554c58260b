# rdmakit_install_man_page(SOURCE NAME SECTION [COMPONENT]): installs the man page SOURCE as
# man<SECTION>/NAME.<SECTION>.gz (in COMPONENT, default the tools'), compressed at build
# time, as Debian policy wants man pages.
# gzip -9n stores no file name and no time stamp, so every build makes the same bytes.

find_program(RDMAKIT_GZIP gzip REQUIRED)

function(rdmakit_install_man_page source name section)
  set(compressed ${PROJECT_BINARY_DIR}/man/${name}.${section}.gz)
  add_custom_command(OUTPUT ${compressed}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${PROJECT_BINARY_DIR}/man
    COMMAND sh -c "\"$1\" -9n -c \"$2\" > \"$3.tmp\" && mv \"$3.tmp\" \"$3\"" sh ${RDMAKIT_GZIP} ${source} ${compressed}
    DEPENDS ${source}
    COMMENT "Compressing man page ${name}.${section}"
    VERBATIM)
  add_custom_target(man.${name}.${section} ALL DEPENDS ${compressed})
  set(component tools)
  if(ARGC GREATER 3)
    set(component ${ARGV3})
  endif()
  install(FILES ${compressed} DESTINATION ${CMAKE_INSTALL_MANDIR}/man${section} COMPONENT ${component})
endfunction()
