# Install layout, the files generated from the built hcctl (completion scripts, man pages), the
# systemd units, and the .deb (CPack). Included by the top-level CMakeLists.txt.
include(GNUInstallDirs)

# Man pages are printed by the built programs from their command tables (common/cmdline.h) into
# the build directory, so they can never list a command the binary does not have: hcctl's
# section 1 pages by `hcctl __man --dir`, hcctld(8) and hcagent(8) by `PROG __man FILE`. The completion scripts are committed
# under completions/ (a checkout can source them without building, and the build writes nothing
# into the source tree); tests/e2e/t41_package.sh fails when they differ from what the built
# hcctl prints, i.e. when the command table changed and `scripts/gen-completions.sh` was not run.
set(HC_COMPLETIONS_DIR ${CMAKE_SOURCE_DIR}/completions)
set(HC_MAN_DIR ${CMAKE_BINARY_DIR}/man)
set(HC_GENERATED "")
# One page per visible group: the names come from the table, so the whole directory is
# regenerated (a removed group leaves no stale page) and installed as it is.
add_custom_command(OUTPUT ${HC_MAN_DIR}/hcctl.1
  COMMAND ${CMAKE_COMMAND} -E rm -rf ${HC_MAN_DIR}
  COMMAND $<TARGET_FILE:hcctl> __man --dir ${HC_MAN_DIR}
  DEPENDS hcctl
  COMMENT "Generating the hcctl man pages" VERBATIM)
list(APPEND HC_GENERATED ${HC_MAN_DIR}/hcctl.1)
set(HC_MAN8_DIR ${CMAKE_BINARY_DIR}/man8)
foreach(prog hcctld hcagent)
  add_custom_command(OUTPUT ${HC_MAN8_DIR}/${prog}.8
    COMMAND ${CMAKE_COMMAND} -E make_directory ${HC_MAN8_DIR}
    COMMAND $<TARGET_FILE:${prog}> __man ${HC_MAN8_DIR}/${prog}.8
    DEPENDS ${prog}
    COMMENT "Generating the ${prog} man page" VERBATIM)
  list(APPEND HC_GENERATED ${HC_MAN8_DIR}/${prog}.8)
endforeach()
add_custom_target(docs_generated ALL DEPENDS ${HC_GENERATED})

install(TARGETS hcctl hcctld hcagent RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES ${HC_COMPLETIONS_DIR}/hcctl.bash
  DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions RENAME hcctl)
install(FILES ${HC_COMPLETIONS_DIR}/hcctl.zsh
  DESTINATION ${CMAKE_INSTALL_DATADIR}/zsh/vendor-completions RENAME _hcctl)
install(FILES ${HC_COMPLETIONS_DIR}/hcctl.fish
  DESTINATION ${CMAKE_INSTALL_DATADIR}/fish/vendor_completions.d)
install(DIRECTORY ${HC_MAN_DIR}/ DESTINATION ${CMAKE_INSTALL_MANDIR}/man1
  FILES_MATCHING PATTERN "*.1")
install(FILES ${HC_MAN8_DIR}/hcctld.8 ${HC_MAN8_DIR}/hcagent.8
  DESTINATION ${CMAKE_INSTALL_MANDIR}/man8)

# systemd units. ExecStart must name the installed binary, and CPack installs under its own
# prefix (/usr) whatever CMAKE_INSTALL_PREFIX was at configure time: so the units are written
# at install time, from the prefix in force then, mode 0644 whatever the source's mode (a
# checkout under umask 002 has 0664 files), and recorded in install_manifest.txt.
set(HC_SYSTEMD_UNIT_DIR "lib/systemd/system" CACHE STRING
  "where the systemd units go, relative to the install prefix")
# hcagent.service.in is also the unit hcctld pushes over SSH (embedded below): its ExecStart and
# StateDirectory are placeholders, filled here for the package and in controller/ops/op_bootstrap.c
# for a pushed node.
# hcctld-backup.service runs packaging/scripts/hcctld-backup from HC_LIBEXECDIR.
foreach(unit hcctld hcagent hcctld-backup)
  install(CODE "
    set(HC_BINDIR \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_BINDIR}\")
    set(HC_LIBEXECDIR \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBEXECDIR}/hcctl\")
    set(HC_AGENT_EXEC \"\${HC_BINDIR}/hcagent run --data-dir /var/lib/hcagent\")
    set(HC_AGENT_STATE hcagent)
    set(unit_dir \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${HC_SYSTEMD_UNIT_DIR}\")
    message(STATUS \"Installing: \${unit_dir}/${unit}.service\")
    configure_file(\"${CMAKE_SOURCE_DIR}/packaging/systemd/${unit}.service.in\"
                   \"\${unit_dir}/${unit}.service\" @ONLY
                   FILE_PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
    list(APPEND CMAKE_INSTALL_MANIFEST_FILES \"\${CMAKE_INSTALL_PREFIX}/${HC_SYSTEMD_UNIT_DIR}/${unit}.service\")")
endforeach()

# The daily backup (docs/hcctld.md "Scheduled backups"): the timer and the script its service
# runs.
install(FILES ${CMAKE_SOURCE_DIR}/packaging/systemd/hcctld-backup.timer
  DESTINATION ${HC_SYSTEMD_UNIT_DIR} PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
install(PROGRAMS ${CMAKE_SOURCE_DIR}/packaging/scripts/hcctld-backup
  DESTINATION ${CMAKE_INSTALL_LIBEXECDIR}/hcctl)

# The storage service's user: uid/gid 60600 needs no account (agents/hcagent/privilege.h); the package
# gives it the name hcsvc, so that ps and ls show one (systemd-sysusers, run by the postinst).
install(FILES ${CMAKE_SOURCE_DIR}/packaging/sysusers.d/hcagent.conf
  DESTINATION lib/sysusers.d PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)

# The unit pushed over SSH is the packaged template, embedded in hcctld (one source of truth
# for the agent's hardening).
set(HC_AGENT_UNIT_H ${CMAKE_BINARY_DIR}/generated/hcagent_unit.h)
add_custom_command(OUTPUT ${HC_AGENT_UNIT_H}
  COMMAND ${CMAKE_COMMAND} -DIN=${CMAKE_SOURCE_DIR}/packaging/systemd/hcagent.service.in
          -DOUT=${HC_AGENT_UNIT_H} -DNAME=hc_agent_unit_template
          -P ${CMAKE_SOURCE_DIR}/packaging/embed_unit.cmake
  DEPENDS ${CMAKE_SOURCE_DIR}/packaging/systemd/hcagent.service.in
          ${CMAKE_SOURCE_DIR}/packaging/embed_unit.cmake
  COMMENT "Embedding the hcagent unit" VERBATIM)
target_sources(hcctld_lib PRIVATE ${HC_AGENT_UNIT_H})
target_include_directories(hcctld_lib PRIVATE ${CMAKE_BINARY_DIR}/generated)

# The .deb: `cpack -G DEB` in the build directory. Depends is computed from the binaries'
# shared libraries by dpkg-shlibdeps (dpkg-dev), so it follows whatever the build linked.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME hcctl)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_VENDOR "hcctl")
set(CPACK_PACKAGE_CONTACT "hcctl maintainers <hcctl-maintainers@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
  "storage layer manager for hyperconverged clusters (hcctl, hcctld, hcagent)")
set(CPACK_PACKAGE_DESCRIPTION
  "hcctl installs, configures (including jumbo-frame MTUs) and upgrades the user-space storage
 service of a hyperconverged cluster, one node at a time. The package holds the CLI (hcctl),
 the controller (hcctld), the node agent (hcagent), their man pages, bash/zsh/fish
 completion and systemd units.")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "openssh-client")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA ${CMAKE_SOURCE_DIR}/packaging/debian/postinst)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
include(CPack)
