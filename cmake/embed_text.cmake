# embed_text.cmake: writes the text file IN into the C source OUT as `const char SYMBOL[]`.
# Run as: cmake -DIN=file -DOUT=file.c -DSYMBOL=name -P embed_text.cmake
file(READ "${IN}" text)
string(REPLACE "\\" "\\\\" text "${text}")
string(REPLACE "\"" "\\\"" text "${text}")
string(REPLACE "\n" "\\n\"\n  \"" text "${text}")
get_filename_component(name "${IN}" NAME)
file(WRITE "${OUT}.tmp" "/* Generated from ${name} by cmake/embed_text.cmake: do not edit. */\nconst char ${SYMBOL}[] =\n  \"${text}\";\n")
configure_file("${OUT}.tmp" "${OUT}" COPYONLY)
file(REMOVE "${OUT}.tmp")
