# Generates a C file holding every migration as a string, in file-name order.
# Input: FILES (sorted list of NNNN_name.sql), OUT (the C file to write).
set(body "/* Generated from db/migrations/NNNN_name.sql by db/embed_migrations.cmake. Do not edit. */\n")
string(APPEND body "#include \"db/migrations.h\"\n\nconst struct hc_migration hc_migrations[] = {\n")
set(count 0)
foreach(f ${FILES})
  get_filename_component(name ${f} NAME_WE)
  string(REGEX MATCH "^[0-9]+" num ${name})
  math(EXPR num "${num} + 0")
  # db.c applies every migration above the database's user_version, in order: a gap or a
  # duplicate number (two branches each adding the next one) would skip or reorder one.
  math(EXPR expected "${count} + 1")
  if(NOT num EQUAL expected)
    message(FATAL_ERROR "db/migrations: ${name}.sql is number ${num}, expected ${expected}: "
                        "migrations are numbered 0001, 0002, ... without gaps or duplicates")
  endif()
  file(READ ${f} sql HEX)
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "\\\\x\\1" sql "${sql}")
  string(APPEND body "    {${num}, \"${name}\", \"${sql}\"},\n")
  math(EXPR count "${count} + 1")
endforeach()
string(APPEND body "};\nconst int hc_migrations_count = ${count};\n")
file(WRITE ${OUT}.tmp "${body}")
file(COPY_FILE ${OUT}.tmp ${OUT} ONLY_IF_DIFFERENT)
