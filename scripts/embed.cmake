# Writes OUT, a C file defining `const char NAME[]` (the bytes of IN and a
# terminating NUL) and `const size_t NAME_len` (without the NUL), so the
# binary serves a file of the source tree (docs/report.schema.json) with
# nothing to install beside it.
#   cmake -DIN=file -DOUT=file.c -DNAME=symbol -P scripts/embed.cmake
file(READ "${IN}" hex HEX)
string(LENGTH "${hex}" nhex)
math(EXPR n "${nhex} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n    " bytes "${bytes}")
file(WRITE "${OUT}.tmp"
  "/* Generated from ${IN} by scripts/embed.cmake: do not edit. */\n"
  "#include <stddef.h>\n"
  "extern const char ${NAME}[];\n"
  "extern const size_t ${NAME}_len;\n"
  "const char ${NAME}[] = {\n    ${bytes}0x00};\n"
  "const size_t ${NAME}_len = ${n};\n")
file(RENAME "${OUT}.tmp" "${OUT}")
