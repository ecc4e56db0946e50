# Runs PROGRAM with ARGS (a list) and writes its stdout to OUT; fails the build when it fails.
# (add_custom_command has no portable output redirection.)
# The temporary name is unique: several build directories may write the same OUT.
string(RANDOM LENGTH 8 tag)
execute_process(COMMAND ${PROGRAM} ${ARGS} OUTPUT_FILE ${OUT}.${tag}.tmp RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  file(REMOVE ${OUT}.${tag}.tmp)
  message(FATAL_ERROR "${PROGRAM} ${ARGS} failed: ${rc}")
endif()
file(RENAME ${OUT}.${tag}.tmp ${OUT})
