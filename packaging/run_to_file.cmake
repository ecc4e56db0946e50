# Runs PROGRAM with ARGS (a list) and writes its stdout to OUT; fails the build when it fails.
# (add_custom_command has no portable output redirection.)
execute_process(COMMAND ${PROGRAM} ${ARGS} OUTPUT_FILE ${OUT}.tmp RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  file(REMOVE ${OUT}.tmp)
  message(FATAL_ERROR "${PROGRAM} ${ARGS} failed: ${rc}")
endif()
file(RENAME ${OUT}.tmp ${OUT})
