# Writes the systemd unit template IN as a C string constant NAME into the header OUT, so that
# hcctld pushes over SSH the very unit text the package installs (packaging/systemd/). Run at
# build time: cmake -DIN=... -DOUT=... -DNAME=... -P embed_unit.cmake
file(READ ${IN} text)
string(REPLACE "\\" "\\\\" text "${text}")
string(REPLACE "\"" "\\\"" text "${text}")
string(REPLACE "\n" "\\n\"\n    \"" text "${text}")
get_filename_component(src ${IN} NAME)
set(out "/* Generated from packaging/systemd/${src} by packaging/embed_unit.cmake: do not edit. */\n")
string(APPEND out "static const char ${NAME}[] =\n    \"${text}\";\n")
# Unchanged content keeps its timestamp: nothing that includes it is rebuilt for nothing.
string(RANDOM LENGTH 8 tag)
file(WRITE ${OUT}.${tag}.tmp "${out}")
file(COPY_FILE ${OUT}.${tag}.tmp ${OUT} ONLY_IF_DIFFERENT)
file(REMOVE ${OUT}.${tag}.tmp)
